"""A mounted server's `elicitation/create`, passed on to the user of the turn whose call it serves.

The mounted client declares form elicitation. When the server asks (during one of our calls, in either
protocol era), the request goes to the forwarder of the call in flight on this server (the approval
gate's, see `agent_server.approvals`: bounded by `approvals.timeout_s`, never raising). It is declined
when there is none (a turn with no channel, or no call in flight), when calls of different turns are in
flight at once (it cannot tell whose user to ask), for URL mode, and when the request is oversized.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any

import mcp_types as types
from mcp.client import ClientRequestContext
from pydantic import ValidationError

from agent_server.approvals import ElicitationForwarder, ElicitationRequest

logger = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 4000
MAX_SCHEMA_BYTES = 32 * 1024
"""A form bigger than this is no question for a person: declined, not sent on."""


class ElicitationRelay:
    """One mounted server's relay (see the module docstring)."""

    def __init__(self, server: str) -> None:
        self._server = server
        self._calls: dict[int, ElicitationForwarder] = {}
        self._next = 0

    @contextmanager
    def calling(self, forwarder: ElicitationForwarder | None) -> Generator[None]:
        """Around one call of the server: its elicitations go to `forwarder` (None: declined)."""
        if forwarder is None:
            yield
            return
        self._next += 1
        key = self._next
        self._calls[key] = forwarder
        try:
            yield
        finally:
            del self._calls[key]

    async def handle(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        """The SDK client's elicitation callback."""
        request = self._request(params)
        forwarders = {id(f): f for f in self._calls.values()}
        if request is None or len(forwarders) != 1:
            why = "not a usable form" if request is None else f"{len(forwarders)} turns could be asked"
            logger.info("declined an elicitation of MCP server %r: %s", self._server, why)
            return types.ElicitResult(action="decline")
        (forwarder,) = forwarders.values()
        answer = await forwarder.elicit(request)
        try:
            return types.ElicitResult(action=answer.action, content=answer.content)
        except ValidationError:  # the user's client answered values the wire does not carry
            logger.info("declined an elicitation of MCP server %r: the answer is not a flat form", self._server)
            return types.ElicitResult(action="decline")

    def _request(self, params: types.ElicitRequestParams) -> ElicitationRequest | None:
        if not isinstance(params, types.ElicitRequestFormParams):
            return None
        schema: dict[str, Any] = dict(params.requested_schema)
        if len(params.message) > MAX_MESSAGE_CHARS or len(json.dumps(schema, default=str)) > MAX_SCHEMA_BYTES:
            return None
        return ElicitationRequest(server=self._server, message=params.message, requested_schema=schema)
