"""The MCP handshake era's approval channel: `elicitation/create` (form) to the client of a `run_turn`.

Used when the client declared the elicitation capability (form, or the bare capability that meant form
before modes existed) on a connection that can send requests. On 2026-07-28 a server cannot send
requests: there the same forms travel as input requests of the turn's park (`input_requests.py`: an MCP
task's `input_required`, a `run_turn`'s `InputRequiredResult`), built and read by the functions here. A
client without the capability cannot be asked: no channel, and the headless policy decides.

The question is a flat form of one field, `decision` (`allow_once`, `allow_session`, `deny`; without
`allow_session` for a protected path; defaulting to `deny` when the call is not shown in full), with the
request's message: the tool, and the whole call, faithfully (`agent_server.presentation`). `accept` with a decision is
that decision; `decline` is a denial; `cancel` is a dismissal (the call is not run either way; both are marked
`refused`, so the gate can tell a client that declines without asking anyone from its user). A
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
from agent_server.presentation import escaped

CHANNEL = "elicitation"
USER_CHOICES = ("allow_once", "allow_session", "deny")
_MEANINGS = {
    "allow_once": "allow_once: run this call",
    "allow_session": "allow_session: run it and allow this tool for the rest of the session",
    "deny": "deny: do not run it",
}


def decision_schema(request: ApprovalRequest) -> dict[str, Any]:
    """The flat form of one field, `decision`: the request's choices, and its default (`deny` for a call not
    shown in full or writing to a protected path)."""
    field: dict[str, Any] = {
        "type": "string",
        "title": "Decision",
        "description": "; ".join(_MEANINGS[choice] for choice in request.choices),
        "enum": list(request.choices),
    }
    if request.default_choice is not None:
        field["default"] = request.default_choice
    return {"type": "object", "properties": {"decision": field}, "required": ["decision"]}


def approval_channel(ctx: ServerRequestContext[Any, Any]) -> ApprovalChannel | None:
    """This request's channel to its user, or None when the client cannot be asked (see the module docstring)."""
    if not ctx.session.can_send_request or not declares_form_elicitation(ctx):
        return None
    return ElicitationChannel(ctx)


def declares_form_elicitation(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the request's client takes form elicitations (the capability with `form`, or the bare one
    that meant form before modes existed). On 2026-07-28 the capabilities are the request's own."""
    caps = ctx.session.client_capabilities
    elicitation = caps.elicitation if caps is not None else None
    return elicitation is not None and not (elicitation.form is None and elicitation.url is not None)


def approval_form(request: ApprovalRequest) -> types.ElicitRequest:
    """The approval question as an `elicitation/create` form (every channel over elicitation asks this):
    the request's faithful message (`ApprovalRequest.message`) and `decision_schema`."""
    return _form(request.message, decision_schema(request))


def decision_of(result: types.ElicitResult) -> Decision:
    """The user's answer to `approval_form`."""
    if result.action == "decline":
        return Decision("deny", refused=True)
    if result.action == "cancel":
        return Decision("cancel", refused=True)
    choice = (result.content or {}).get("decision")
    if choice not in USER_CHOICES:
        return Decision("deny", f"the answer held no valid decision ({choice!r})")
    return Decision(cast(Choice, choice))


def elicitation_form(request: ElicitationRequest) -> types.ElicitRequest:
    """A mounted server's form, passed on with its server's name in front of its message (escaped: what
    would render as nothing or reorder the text is shown as `\\u200b`, `\\u202e`)."""
    return _form(f"[{request.server}] {escaped(request.message)}", request.requested_schema)


def answer_of(result: types.ElicitResult) -> ElicitationAnswer:
    """The user's answer to `elicitation_form`, for the mounted server."""
    return ElicitationAnswer(result.action, dict(result.content) if result.content is not None else None)


def _form(message: str, schema: dict[str, Any]) -> types.ElicitRequest:
    params = types.ElicitRequestFormParams(message=message, requested_schema=cast(Any, schema))
    return types.ElicitRequest(params=params)


class ElicitationChannel:
    """Asks the client of one request through `elicitation/create`; see the module docstring."""

    def __init__(self, ctx: ServerRequestContext[Any, Any]) -> None:
        self._ctx = ctx

    @property
    def name(self) -> str:
        return CHANNEL

    async def ask(self, request: ApprovalRequest) -> Decision:
        return decision_of(await self._send(approval_form(request)))

    async def elicit(self, request: ElicitationRequest) -> ElicitationAnswer:
        return answer_of(await self._send(elicitation_form(request)))

    async def _send(self, request: types.ElicitRequest) -> types.ElicitResult:
        related = None if self._ctx.request_id is None else str(self._ctx.request_id)
        return await self._ctx.session.send_request(
            request, types.ElicitResult, metadata=ServerMessageMetadata(related_request_id=related)
        )
