"""The tools agent-server exposes: their parameter and result models (the wire contract).

Each model's JSON Schema is the tool's `inputSchema`/`outputSchema` and is checked into
`schemas/` (`python -m agent_server.server.schemas` regenerates it; a test fails on drift).
Parameters reject unknown keys so that a misspelt argument is an error, not silently ignored.
"""

# No `from __future__ import annotations` here: pydantic would compile every annotation string at import
# (about 6 ms of the first call). Annotations are evaluated as written.

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent_server.types import (
    ApprovalRecord,
    AssistantTurn,
    CompactionRecord,
    DroppedTool,
    ErrorInfo,
    Message,
    SessionInfo,
    ToolRound,
    ToolSpec,
    TraceMode,
    Transition,
    TurnRecord,
    TurnStatus,
    Usage,
    one_line,
)

MAX_PAGE = 200
TOOL_ERROR_LINE_CHARS = 200
"""A failed inner call's error, as one line of a turn summary."""

Detail = Literal["summary", "full"]
_DETAIL_HELP = (
    "`summary` (default): ids, status, final_text, error, usage and one line per inner tool call; "
    "`full`: also every model answer, tool round (with the tools' whole results) and state transition."
)


class _Params(BaseModel):
    # Deferred: a model's validator is built on its first use, not when the handlers are imported.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class _Result(BaseModel):
    model_config = ConfigDict(defer_build=True)


class RunTurnParams(_Params):
    prompt: str = Field(min_length=1, description="What the user asks the agent; must not be blank.")
    session_id: str | None = Field(
        default=None,
        description=(
            "To continue a conversation, the session_id of an earlier result; `new` starts a fresh session; "
            "omitted: this connection's current session (created by the first such call)."
        ),
    )
    max_tool_passes: int | None = Field(default=None, ge=0, le=1000, description="Tool rounds allowed (default 50).")
    timeout_s: float | None = Field(default=None, gt=0, le=86_400, description="Wall-clock limit for the whole turn.")
    trace: TraceMode = Field(default="standard", description="`extended` also records the model's reasoning.")
    model: str | None = Field(default=None, description="Model name override for this turn.")
    tools: list[str] | None = Field(default=None, description="Allow-list of agent tool names or globs.")
    detail: Detail = Field(default="summary", description=_DETAIL_HELP)
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
    detail: Detail = Field(default="summary", description=_DETAIL_HELP)


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
    detail: Detail = Field(default="summary", description=_DETAIL_HELP)


class TurnCancelParams(_Params):
    turn_id: str = Field(min_length=1, description=_TURN_ID_HELP)
    detail: Detail = Field(default="summary", description=_DETAIL_HELP)


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
    detail: Detail = Field(default="summary", description="How much of each turn: " + _DETAIL_HELP)


class HistoryEntry(_Result):
    seq: int
    turn_id: str | None
    archived: bool
    message: Message


class ToolCallLine(_Result):
    """One inner tool call in a turn summary; its result stays in the turn's full record."""

    round: int
    name: str
    is_error: bool
    duration_s: float
    error: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The first line of a failed call's error."""


def _full_only(description: str) -> Any:
    return Field(default=None, exclude_if=lambda v: v is None, description=description + " (detail `full` only)")


class TurnResult(_Result):
    """A turn as results carry it (DESIGN 3.4.1): a summary whose size does not grow with the tools' results,
    or with detail `full` the whole record."""

    turn_id: str
    session_id: str
    trace_id: str
    status: TurnStatus
    final_text: str
    model_calls: int
    """Model answers the turn received."""
    tool_calls: list[ToolCallLine]
    approval_count: int = 0
    """Tool calls the approval gate settled (asked, remembered or refused); `detail: "full"` lists them."""
    usage: Usage
    compaction: CompactionRecord | None = None
    error: ErrorInfo | None = None
    model: str | None = None
    started_at: str
    finished_at: str | None = None
    command: str | None = None
    """The slash command an editor ran (answered without the model); None for a turn of the model."""
    prompt: str | None = _full_only("The user's prompt")
    trace: TraceMode | None = _full_only("The trace mode")
    assistant_turns: list[AssistantTurn] | None = _full_only("Every model answer")
    tool_rounds: list[ToolRound] | None = _full_only("Every tool round, with the whole results")
    transitions: list[Transition] | None = _full_only("The loop's state transitions")
    approvals: list[ApprovalRecord] | None = _full_only("Each call the approval gate settled, and how")

    @classmethod
    def of(cls, record: TurnRecord, detail: Detail) -> "TurnResult":
        summary = record.model_dump(exclude=_FULL_ONLY | {"tool_calls"})
        lines = [
            ToolCallLine(
                round=tool_round.tool_round,
                name=result.name,
                is_error=result.is_error,
                duration_s=round(result.duration_s, 3),
                error=one_line(result.text(), TOOL_ERROR_LINE_CHARS) if result.is_error else None,
            )
            for tool_round in record.tool_rounds
            for result in tool_round.tool_results
        ]
        full = record.model_dump(include=_FULL_ONLY) if detail == "full" else {}
        calls = len(record.assistant_turns)
        count = len(record.approvals)
        return cls.model_validate(
            {**summary, **full, "model_calls": calls, "tool_calls": lines, "approval_count": count}
        )


_FULL_ONLY = {"prompt", "trace", "assistant_turns", "tool_rounds", "transitions", "approvals"}


class TurnWaitResult(TurnResult):
    last_event: int = Field(description="The number of the last event of the turn sent so far (for after_event).")


class ToolError(BaseModel):
    """The structuredContent of every tool's error results; each tool's outputSchema allows it."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    error: ErrorInfo


class SessionGetResult(SessionInfo):
    turns: list[TurnResult]
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
