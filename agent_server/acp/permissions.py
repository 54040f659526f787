"""Approvals asked of the editor through ACP `session/request_permission` (DESIGN 3.7, 3.9).

`AcpApprovalChannel` has the shape of the approval gate's channel: `await channel.ask(call)` returns a
decision, `allow_once`, `allow_session` or `deny`. The client is offered four options; its choice maps
as: allow once -> `allow_once`, allow always -> `allow_session`, reject once / reject always -> `deny`.
A cancelled request (the client answers `cancelled`, e.g. after `session/cancel`), a request that fails,
and no answer within `timeout_s` are `deny`: the tool is not run. Cancelling the turn cancels the
request with it.
"""

from __future__ import annotations

import logging
from typing import Any, Literal, Protocol

import anyio
from acp.schema import AllowedOutcome, PermissionOption, RequestPermissionResponse, ToolCallUpdate

from agent_server.acp.updates import tool_kind
from agent_server.types import ToolCall

logger = logging.getLogger(__name__)

Decision = Literal["allow_once", "allow_session", "deny"]

DEFAULT_TIMEOUT_S = 120.0

DECISIONS: dict[str, Decision] = {
    "allow_once": "allow_once",
    "allow_always": "allow_session",
    "reject_once": "deny",
    "reject_always": "deny",
}
OPTIONS = [
    PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="allow_always", name="Allow for this session", kind="allow_always"),
    PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
    PermissionOption(option_id="reject_always", name="Reject for this session", kind="reject_always"),
]
"""The options offered; each option's id is its kind, which `DECISIONS` maps to the gate's decision."""


class PermissionClient(Protocol):
    """The part of the library's client connection (`acp.Client`) that asks for permission."""

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse: ...


class AcpApprovalChannel:
    """An approval channel over one ACP session; see the module docstring."""

    name = "acp"

    def __init__(self, client: PermissionClient, session_id: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self._client = client
        self._session_id = session_id
        self._timeout_s = timeout_s

    async def ask(self, call: ToolCall) -> Decision:
        from acp.helpers import update_tool_call

        tool_call = update_tool_call(
            call.id, title=call.name, kind=tool_kind(call.name), status="pending", raw_input=call.arguments
        )
        with anyio.move_on_after(self._timeout_s):
            try:
                response = await self._client.request_permission(self._session_id, tool_call, list(OPTIONS))
            except Exception as exc:  # the client went away, or answered with an error
                logger.warning("permission request for %s failed: %s", call.name, exc)
                return "deny"
            return decision_of(response)
        logger.warning("permission request for %s had no answer within %s s", call.name, self._timeout_s)
        return "deny"


def decision_of(response: RequestPermissionResponse) -> Decision:
    outcome = response.outcome
    if not isinstance(outcome, AllowedOutcome):
        return "deny"
    return DECISIONS.get(outcome.option_id, "deny")
