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

No MCP types here: arguments are plain JSON values, already summarised and redacted by the gate.
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Choice = Literal["allow_once", "allow_session", "deny", "cancel"]
"""The user's answer: run this call; run it and every later call of the tool in this session; do not run
it; or the user dismissed the question (not run either)."""

ElicitationAction = Literal["accept", "decline", "cancel"]


@dataclass(frozen=True, kw_only=True)
class ApprovalRequest:
    """One tool call waiting for the user's approval."""

    tool: str
    """The agent-side tool name (a mounted tool's is `<prefix>__<tool>`)."""
    arguments: dict[str, Any]
    """The call's arguments with secret-looking values masked."""
    summary: str
    """The arguments on one short line, redacted: what a host shows next to the tool name."""
    source: str
    """Where the tool comes from: `builtin`, `plugin` or `mcp:<server>`."""
    session_id: str
    call_id: str

    @property
    def message(self) -> str:
        """The question as one line of text, for channels that show only text."""
        origin = "" if self.source in ("builtin", "plugin") else f" (from {self.source})"
        return f"Allow the agent to run {self.tool}{origin}? {self.summary}".rstrip()


@dataclass(frozen=True)
class Decision:
    choice: Choice
    reason: str | None = None
    """Why, in the user's or the channel's words, when it says."""


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
