"""Approvals asked of the editor through ACP `session/request_permission` (DESIGN 3.7, 3.9).

`AcpApprovalChannel` is the approval gate's channel (`agent_server.approvals.ApprovalChannel`) for one ACP
session. The editor is offered four options; its choice maps as: allow once -> `allow_once`, allow always
-> `allow_session` (remembered for the session by the gate), reject once / reject always -> `deny`. A
cancelled request (the client answers `cancelled`, e.g. after `session/cancel`) is `cancel`: the tool is
not run either. The gate bounds every ask (`approvals.timeout_s`, the turn's deadline) and turns a failed
request into a denial; cancelling the turn cancels the request with it. ACP v1 has no form requests, so a
mounted server's elicitation is declined.
"""

from __future__ import annotations

from typing import Any, Protocol

from acp.schema import AllowedOutcome, PermissionOption, RequestPermissionResponse, ToolCallUpdate

from agent_server.acp.updates import tool_kind
from agent_server.approvals import DECLINED, ApprovalRequest, Choice, Decision, ElicitationAnswer, ElicitationRequest

CHOICES: dict[str, Choice] = {
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
"""The options offered; each option's id is its kind, which `CHOICES` maps to the gate's choice."""


class PermissionClient(Protocol):
    """The part of the library's client connection (`acp.Client`) that asks for permission."""

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse: ...


class AcpApprovalChannel:
    """An approval channel over one ACP session; see the module docstring."""

    name = "acp"

    def __init__(self, client: PermissionClient, session_id: str) -> None:
        self._client = client
        self._session_id = session_id

    async def ask(self, request: ApprovalRequest) -> Decision:
        from acp.helpers import update_tool_call

        tool_call = update_tool_call(
            request.call_id,
            title=request.message,
            kind=tool_kind(request.tool),
            status="pending",
            raw_input=request.arguments,
        )
        return decision_of(await self._client.request_permission(self._session_id, tool_call, list(OPTIONS)))

    async def elicit(self, request: ElicitationRequest) -> ElicitationAnswer:
        return DECLINED


def decision_of(response: RequestPermissionResponse) -> Decision:
    outcome = response.outcome
    if not isinstance(outcome, AllowedOutcome):
        return Decision("cancel", "the editor cancelled the permission request")
    choice = CHOICES.get(outcome.option_id)
    if choice is None:
        return Decision("deny", f"the editor answered an unknown option {outcome.option_id!r}")
    return Decision(choice, "rejected in the editor" if choice == "deny" else None)
