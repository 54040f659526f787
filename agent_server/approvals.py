"""Leaf module: how the approval gate asks the caller, whatever the front door (DESIGN 3.7).

An `ApprovalChannel` is what one call of `run_turn` lends the turn to reach its user: it answers an
`ApprovalRequest` (may the agent run this tool call?) with a `Decision`, and passes on an
`ElicitationRequest` of a mounted server (a form the server wants filled) with an `ElicitationAnswer`.
The gate (`agent_server.agent.approvals`) owns every bound: it times each ask out after
`approvals.timeout_s`, turns an exception into a denial, and never runs a call the channel did not allow;
a channel only has to ask and wait.

Channels (each front door builds its own; `name` is what the turn record's `approvals` say):

- `elicitation`: the MCP handshake era's server-to-client `elicitation/create` (form), in `server/`.
- `input_required`: MCP 2026-07-28, where a server cannot send requests: the turn parks
  (`runtime.park.ParkedApprovals`) and `run_turn` answers an `InputRequiredResult` carrying the
  `elicitation/create` (DESIGN 3.8); `ask` returns when the client retries with its `inputResponses`.
- `task`: the same park under an MCP task, which moves to `input_required`; `ask` returns when the
  client answers through `tasks/update`.
- `acp`: ACP's `session/request_permission`, whose options map onto `Decision.choice`
  (`allow_once`, `allow_always` -> `allow_session`, `reject_*` -> `deny`; a cancelled request -> `cancel`).
- `web`: the web view (settings `approvals.web`), chosen by the runtime for a turn without another channel
  (or for every turn, `"always"`): the question waits in the store for any page to answer
  (`agent_server.runtime.web_approvals`).

What a question shows of a call is built once, by the gate, with `agent_server.presentation.present_call`
(the whole call, escaped, or a cut that says so and defaults to deny), and every channel shows that
(`ApprovalRequest.message`). No MCP types here: arguments are plain JSON values, masked by the gate.
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from agent_server.presentation import Presentation
from agent_server.types import ToolKind

Choice = Literal["allow_once", "allow_session", "deny", "cancel"]
"""The user's answer: run this call; run it and every later call of the tool in this session; do not run
it; or the user dismissed the question (not run either)."""

ElicitationAction = Literal["accept", "decline", "cancel"]


@dataclass(frozen=True, kw_only=True)
class ApprovalRequest:
    """One tool call waiting for the user's approval. A channel shows `message` (or its parts: the call as
    `shown`, `warning`), offers `choices`, and preselects `default_choice` where it can."""

    tool: str
    """The agent-side tool name (a mounted tool's is `<prefix>__<tool>`)."""
    arguments: dict[str, Any]
    """The call's arguments with secret-looking values masked and long values cut
    (`presentation.cap_arguments`): for channels that also pass the call on as data (ACP's `rawInput`)."""
    shown: Presentation
    """The call as a person is shown it (`presentation.present_call`): whole, escaped and masked, or cut
    with the number of characters hidden."""
    source: str
    """Where the tool comes from: `builtin`, `plugin` or `mcp:<server>`."""
    session_id: str
    kind: ToolKind = "other"
    """What the tool does (its spec's `kind`)."""
    call_id: str
    warning: str | None = None
    """Set when the call writes to a protected path the user opted in to (`tools.protected_ask`): said
    first in the question; `allow_session` is not offered, nor remembered if answered."""

    @property
    def remembers(self) -> bool:
        """Whether `allow_session` is offered (not for a protected path: those are asked every time)."""
        return self.warning is None

    @property
    def choices(self) -> tuple[Choice, ...]:
        return ("allow_once", "allow_session", "deny") if self.remembers else ("allow_once", "deny")

    @property
    def default_choice(self) -> Choice | None:
        """`deny` for a call not shown in full or writing to a protected path; else no default."""
        return "deny" if self.shown.cut or self.warning is not None else None

    @property
    def message(self) -> str:
        """The question as text, for channels that show only text: the question, the warning, whether the
        call is shown whole (and in how many lines) or cut (how much is hidden), then the call."""
        origin = "" if self.source in ("builtin", "plugin") else f" (from {self.source})"
        lines = [f"Allow the agent to run {self.tool}{origin}?"]
        if self.warning is not None:
            lines.append(f"WARNING: {self.warning}")
        shown = self.shown
        if shown.cut:
            lines.append(
                f"NOT SHOWN IN FULL: {shown.hidden_chars:,} characters of this call are hidden below "
                "(approvals.max_shown_chars). The default answer is deny: allow it only if you know what the "
                "hidden part does."
            )
        else:
            count = shown.lines
            lines.append(
                f"The whole call is shown below ({count} line{'' if count == 1 else 's'}; invisible and control "
                "characters appear escaped, as \\u200b or \\x1b)."
            )
        lines.append(shown.text)
        return "\n".join(lines)


@dataclass(frozen=True)
class Decision:
    choice: Choice
    reason: str | None = None
    """Why, in the user's or the channel's words, when it says."""
    refused: bool = False
    """The client refused the question as a whole (an elicitation's `decline` or `cancel`) instead of choosing
    one of its answers. A headless client does that at once, asking nobody (`claude -p`, `codex exec`): the gate
    tells such a refusal from a person's by how soon it came (`agent.approvals.UNASKED_S`)."""


@dataclass(frozen=True, kw_only=True)
class ElicitationRequest:
    """A mounted server's form request (MCP `elicitation/create`, form mode), to pass to the user as it is."""

    server: str
    message: str
    requested_schema: dict[str, Any]


@dataclass(frozen=True)
class ElicitationAnswer:
    action: ElicitationAction
    content: dict[str, Any] | None = None
    """The form's values, with `accept`."""


DECLINED = ElicitationAnswer("decline")


class ApprovalChannel(Protocol):
    """See the module docstring. Implementations may raise; the gate bounds and contains every call."""

    @property
    def name(self) -> str:
        """`elicitation`, `input_required`, `task`, `acp`: recorded with each decision."""
        ...

    async def ask(self, request: ApprovalRequest) -> Decision: ...

    async def elicit(self, request: ElicitationRequest) -> ElicitationAnswer: ...


class ElicitationForwarder(Protocol):
    """The current tool call's way to its user, for a mounted server's elicitation: already bounded in
    time and never raising (the gate's wrapper around the turn's channel)."""

    async def elicit(self, request: ElicitationRequest) -> ElicitationAnswer: ...


_current: ContextVar[ElicitationForwarder | None] = ContextVar("agent_server_elicitation_forwarder", default=None)


@contextmanager
def forwarding_to(forwarder: ElicitationForwarder | None) -> Generator[None]:
    """Run a tool call with `forwarder` as the way to its user (read by mounted servers' connections)."""
    token = _current.set(forwarder)
    try:
        yield
    finally:
        _current.reset(token)


def current_forwarder() -> ElicitationForwarder | None:
    """The forwarder of the tool call running in this task, if its turn has a channel."""
    return _current.get()


_approved: ContextVar[bool] = ContextVar("agent_server_user_approved", default=False)


@contextmanager
def approved_by_user(approved: bool) -> Generator[None]:
    """Run a tool call knowing whether the user allowed this very call (answered a question about it)."""
    token = _approved.set(approved)
    try:
        yield
    finally:
        _approved.reset(token)


def user_approved() -> bool:
    """Whether the tool call running in this task (or its worker thread) was allowed by the user's answer,
    not by the policy: what a write to an opted-in protected path needs (`tools.protected`)."""
    return _approved.get()
