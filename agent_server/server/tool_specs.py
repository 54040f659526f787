"""The tools agent-server exposes: their parameter and result models (the wire contract).

Each model's JSON Schema is the tool's `inputSchema`/`outputSchema` and is checked into
`schemas/` (`python -m agent_server.server.schemas` regenerates it; a test fails on drift).
Parameters reject unknown keys so that a misspelt argument is an error, not silently ignored.
"""

# No `from __future__ import annotations` here: pydantic would compile every annotation string at import
# (about 6 ms of the first call). Annotations are evaluated as written.

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent_server.doors.records import DETAIL_HELP, Detail, TurnView
from agent_server.turn_options import TurnChoices
from agent_server.types import (
    CompactionRecord,
    DroppedTool,
    ErrorInfo,
    Message,
    SessionInfo,
    ToolSpec,
)

MAX_PAGE = 200


class _Params(BaseModel):
    # Deferred: a model's validator is built on its first use, not when the handlers are imported.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class _Result(BaseModel):
    model_config = ConfigDict(defer_build=True)


class RunTurnParams(TurnChoices):
    """`run_turn`'s arguments: the turn's choices (`TurnChoices`, every door's), and the MCP door's own."""

    prompt: str = Field(min_length=1, description="What the user asks the agent; must not be blank.")
    session_id: str | None = Field(
        default=None,
        description=(
            "To continue a conversation, the session_id of an earlier result; `new` starts a fresh session; "
            "omitted: this connection's current session (created by the first such call)."
        ),
    )
    detail: Detail = Field(default="summary", description=DETAIL_HELP)
    background: bool = Field(
        default=False,
        description=(
            "Return the `running` record at once and run the turn in the server; follow it with turn_wait "
            "(streams its events) or turn_get, stop it with turn_cancel. For hosts whose tool calls time out."
        ),
    )

    @field_validator("prompt")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("prompt must not be blank")
        return value


_TURN_ID_HELP = "The turn_id of a run_turn result."
_TURN_SESSION_HELP = "The turn's session_id (optional: a turn is found by its turn_id alone)."
TURN_WAIT_DEFAULT_S = 60.0
TURN_WAIT_MAX_S = 600.0


class TurnGetParams(_Params):
    turn_id: str = Field(min_length=1, description=_TURN_ID_HELP)
    session_id: str | None = Field(default=None, description=_TURN_SESSION_HELP)
    detail: Detail = Field(default="summary", description=DETAIL_HELP)


class TurnWaitParams(_Params):
    turn_id: str = Field(min_length=1, description=_TURN_ID_HELP)
    session_id: str | None = Field(default=None, description=_TURN_SESSION_HELP)
    timeout_s: float = Field(
        default=TURN_WAIT_DEFAULT_S,
        gt=0,
        le=TURN_WAIT_MAX_S,
        description="How long to wait; then the `running` record comes back (the turn goes on). Default 60.",
    )
    after_event: int | None = Field(
        default=None,
        ge=0,
        description=(
            "Stream the events after this number (a previous result's last_event; 0: all of them). "
            "Default: after the last event this connection was sent."
        ),
    )
    detail: Detail = Field(default="summary", description=DETAIL_HELP)


class TurnCancelParams(_Params):
    turn_id: str = Field(min_length=1, description=_TURN_ID_HELP)
    detail: Detail = Field(default="summary", description=DETAIL_HELP)


class CompactParams(_Params):
    session_id: str | None = Field(default=None, description="Session to compact; default the current one.")
    keep_last: int | None = Field(default=None, ge=0, le=10_000, description="Recent messages kept verbatim.")
    instructions: str | None = Field(default=None, description="What the summary must keep.")
    dry_run: bool = Field(default=False, description="Preview the summary without changing the session.")


class CompactResult(CompactionRecord):
    session_id: str


class SessionCreateParams(_Params):
    title: str | None = Field(default=None, max_length=200)
    metadata: dict[str, Any] | None = None


class SessionListParams(_Params):
    cursor: str | None = None
    limit: int = Field(default=50, ge=1, le=MAX_PAGE)


class SessionListResult(_Result):
    sessions: list[SessionInfo]
    next_cursor: str | None = None


class SessionGetParams(_Params):
    session_id: str | None = Field(default=None, description="Default: this connection's current session.")
    turns_cursor: str | None = None
    turns_limit: int = Field(default=20, ge=1, le=MAX_PAGE)
    include_history: bool = Field(default=False, description="Also return one page of the stored messages.")
    history_cursor: str | None = Field(
        default=None, description="`next_history_cursor` of the previous page; implies include_history."
    )
    history_limit: int = Field(default=50, ge=1, le=MAX_PAGE, description="Messages per history page.")
    detail: Detail = Field(default="summary", description="How much of each turn: " + DETAIL_HELP)


class HistoryEntry(_Result):
    seq: int
    turn_id: str | None
    archived: bool
    message: Message


TurnResult = TurnView
"""The result of `run_turn`, `turn_get` and `turn_cancel` (`doors.records`: every door's view of a record)."""


class TurnWaitResult(TurnView):
    last_event: int = Field(description="The number of the last event of the turn sent so far (for after_event).")


class ToolError(BaseModel):
    """The structuredContent of every tool's error results; each tool's outputSchema allows it."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    error: ErrorInfo


class SessionGetResult(SessionInfo):
    turns: list[TurnView]
    next_turns_cursor: str | None = None
    summary: str | None = None
    compactions: list[CompactionRecord]
    history: list[HistoryEntry] | None = None
    next_history_cursor: str | None = None


class SessionIdParams(_Params):
    session_id: str = Field(min_length=1)


class SessionForkParams(_Params):
    session_id: str | None = Field(default=None, description="Default: this connection's current session.")
    at_turn: str | None = Field(default=None, description="Turn id to fork after; default the latest.")
    title: str | None = Field(default=None, max_length=200)


class SessionDeleteResult(_Result):
    session_id: str
    deleted: bool


class AgentToolsParams(_Params):
    pass


class MountState(_Result):
    name: str
    transport: str
    state: str
    error: str | None = None
    tool_count: int = 0


class CommandSandboxState(_Result):
    mode: Literal["bwrap", "none", "refused"] = Field(
        description="bwrap: run_command runs in a bubblewrap sandbox; none: without one; refused: commands are "
        "refused (tools.sandbox is bwrap and bwrap does not work here)."
    )
    reason: str = Field(description="Why this mode, e.g. 'bwrap not found on PATH (install bubblewrap)'.")
    network: bool = Field(description="Whether a command can reach the network.")


class AgentToolsResult(_Result):
    tools: list[ToolSpec]
    servers: list[MountState]
    dropped: list[DroppedTool] = Field(
        default_factory=list[DroppedTool], description="Tools not offered to the model (name clash, invalid schema)."
    )
    sandbox: CommandSandboxState | None = Field(
        default=None, description="Where run_command runs; absent when run_command is off."
    )
