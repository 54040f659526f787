"""Approvals asked of the editor through ACP `session/request_permission` (DESIGN 3.7, 3.9).

`AcpApprovalChannel` is the approval gate's channel (`agent_server.approvals.ApprovalChannel`) for one ACP
session. The permission request's tool call keeps its title (the tool's name) and carries the question in
its content: the whole call as `ApprovalRequest.message` shows it (escaped), or the statement that it is
cut and how much is hidden, in which case the reject options come first. The editor is offered four
options (three for a protected path, which is asked every time: no "allow always"); its choice maps as:
allow once -> `allow_once`, allow always -> `allow_session` (remembered for the session by the gate),
reject once / reject always -> `deny`. A
cancelled request (the client answers `cancelled`, e.g. after `session/cancel`) is `cancel`: the tool is
not run either. The gate bounds every ask (`approvals.timeout_s`, the turn's deadline) and turns a failed
request into a denial; cancelling the turn cancels the request with it. ACP v1 has no form requests, so a
mounted server's elicitation is declined.
"""

from __future__ import annotations

from typing import Any, Protocol

from acp.schema import AllowedOutcome, PermissionOption, RequestPermissionResponse, ToolCallUpdate

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
        tool_call = permission_tool_call(request)
        return decision_of(await self._client.request_permission(self._session_id, tool_call, options_for(request)))

    async def elicit(self, request: ElicitationRequest) -> ElicitationAnswer:
        return DECLINED


def permission_tool_call(request: ApprovalRequest) -> ToolCallUpdate:
    """The tool call the permission is asked for: its title stays the tool call's (`updates.update_for`:
    the tool's name), and the question, with the whole call as `ApprovalRequest.message` shows it (or the
    cut and how much it hides), is its content; `rawInput` is the masked, bounded arguments."""
    from acp.helpers import text_block, tool_content, update_tool_call

    return update_tool_call(
        request.call_id,
        title=request.tool,
        kind=request.kind,
        status="pending",
        content=[tool_content(text_block(request.message))],
        raw_input=request.arguments,
    )


def options_for(request: ApprovalRequest) -> list[PermissionOption]:
    """`OPTIONS`, rejecting first when the request's default is to deny (editors tend to preselect the first),
    and without `allow_always` for a protected path (asked every time)."""
    offered = [o for o in OPTIONS if request.remembers or o.kind != "allow_always"]
    if request.default_choice == "deny":
        offered.sort(key=lambda option: not option.kind.startswith("reject"))
    return offered


def decision_of(response: RequestPermissionResponse) -> Decision:
    outcome = response.outcome
    if not isinstance(outcome, AllowedOutcome):
        return Decision("cancel", "the editor cancelled the permission request")
    choice = CHOICES.get(outcome.option_id)
    if choice is None:
        return Decision("deny", f"the editor answered an unknown option {outcome.option_id!r}")
    return Decision(choice, "rejected in the editor" if choice == "deny" else None)
