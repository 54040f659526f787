"""The MCP handshake era's approval channel: `elicitation/create` (form) to the client of a `run_turn`.

Used when the client declared the elicitation capability (form, or the bare capability that meant form
before modes existed) on a connection that can send requests. On 2026-07-28 a server cannot send
requests (an `InputRequiredResult` channel will plug into the same gate, DESIGN 3.8), and a client
without the capability cannot be asked: both get no channel, and the headless policy decides.

The question is a flat form of one field, `decision` (`allow_once`, `allow_session`, `deny`), with a
message naming the tool and a short, redacted summary of its arguments. `accept` with a decision is
that decision; `decline` is a denial; `cancel` is a dismissal (the call is not run either way). A
mounted server's own elicitation is passed on with its message (prefixed with the server's name, so
the user knows who asks) and its schema, and its answer passed back.
"""

from __future__ import annotations

from typing import Any, cast

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.message import ServerMessageMetadata

from agent_server.approvals import (
    ApprovalChannel,
    ApprovalRequest,
    Choice,
    Decision,
    ElicitationAnswer,
    ElicitationRequest,
)

CHANNEL = "elicitation"
USER_CHOICES = ("allow_once", "allow_session", "deny")
DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "title": "Decision",
            "description": "allow_once: run this call; allow_session: run it and allow this tool for the rest "
            "of the session; deny: do not run it",
            "enum": list(USER_CHOICES),
        }
    },
    "required": ["decision"],
}


def approval_channel(ctx: ServerRequestContext[Any, Any]) -> ApprovalChannel | None:
    """This request's channel to its user, or None when the client cannot be asked (see the module docstring)."""
    if not ctx.session.can_send_request:
        return None
    caps = ctx.session.client_capabilities
    elicitation = caps.elicitation if caps is not None else None
    if elicitation is None or (elicitation.form is None and elicitation.url is not None):
        return None
    return ElicitationChannel(ctx)


class ElicitationChannel:
    """Asks the client of one request through `elicitation/create`; see the module docstring."""

    def __init__(self, ctx: ServerRequestContext[Any, Any]) -> None:
        self._ctx = ctx

    @property
    def name(self) -> str:
        return CHANNEL

    async def ask(self, request: ApprovalRequest) -> Decision:
        result = await self._send(request.message, DECISION_SCHEMA)
        if result.action == "decline":
            return Decision("deny", "declined")
        if result.action == "cancel":
            return Decision("cancel")
        choice = (result.content or {}).get("decision")
        if choice not in USER_CHOICES:
            return Decision("deny", f"the answer held no valid decision ({choice!r})")
        return Decision(cast(Choice, choice))

    async def elicit(self, request: ElicitationRequest) -> ElicitationAnswer:
        result = await self._send(f"[{request.server}] {request.message}", request.requested_schema)
        return ElicitationAnswer(result.action, dict(result.content) if result.content is not None else None)

    async def _send(self, message: str, schema: dict[str, Any]) -> types.ElicitResult:
        params = types.ElicitRequestFormParams(message=message, requested_schema=cast(Any, schema))
        related = None if self._ctx.request_id is None else str(self._ctx.request_id)
        return await self._ctx.session.send_request(
            types.ElicitRequest(params=params),
            types.ElicitResult,
            metadata=ServerMessageMetadata(related_request_id=related),
        )
