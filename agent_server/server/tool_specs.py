"""The tools agent-server exposes: their parameter and result models (the wire contract).

Each model's JSON Schema is the tool's `inputSchema`/`outputSchema` and is checked into
`schemas/` (`python -m agent_server.server.schemas` regenerates it; a test fails on drift).
Parameters reject unknown keys so that a misspelt argument is an error, not silently ignored.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent_server.types import (
    CompactionRecord,
    DroppedTool,
    Message,
    SessionInfo,
    ToolSpec,
    TraceMode,
    TurnRecord,
)

MAX_PAGE = 200


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RunTurnParams(_Params):
    prompt: str = Field(min_length=1, description="What the user asks the agent; must not be blank.")
    session_id: str | None = Field(
        default=None, description="Session to run in; default the active one (created if none)."
    )
    max_tool_passes: int | None = Field(default=None, ge=0, le=1000, description="Tool rounds allowed (default 50).")
    timeout_s: float | None = Field(default=None, gt=0, le=86_400, description="Wall-clock limit for the whole turn.")
    trace: TraceMode = Field(default="standard", description="`extended` also records the model's reasoning.")
    model: str | None = Field(default=None, description="Model name override for this turn.")
    tools: list[str] | None = Field(default=None, description="Allow-list of agent tool names or globs.")

    @field_validator("prompt")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("prompt must not be blank")
        return value


class CompactParams(_Params):
    session_id: str | None = Field(default=None, description="Session to compact; default the active one.")
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


class SessionListResult(BaseModel):
    sessions: list[SessionInfo]
    next_cursor: str | None = None


class SessionGetParams(_Params):
    session_id: str | None = Field(default=None, description="Default: the active session.")
    turns_cursor: str | None = None
    turns_limit: int = Field(default=20, ge=1, le=MAX_PAGE)
    include_history: bool = False


class HistoryEntry(BaseModel):
    seq: int
    turn_id: str | None
    archived: bool
    message: Message


class SessionGetResult(SessionInfo):
    turns: list[TurnRecord]
    next_turns_cursor: str | None = None
    summary: str | None = None
    compactions: list[CompactionRecord]
    history: list[HistoryEntry] | None = None


class SessionIdParams(_Params):
    session_id: str = Field(min_length=1)


class SessionForkParams(_Params):
    session_id: str | None = Field(default=None, description="Default: the active session.")
    at_turn: str | None = Field(default=None, description="Turn id to fork after; default the latest.")
    title: str | None = Field(default=None, max_length=200)


class SessionDeleteResult(BaseModel):
    session_id: str
    deleted: bool


class AgentToolsParams(_Params):
    pass


class MountState(BaseModel):
    name: str
    transport: str
    state: str
    error: str | None = None
    tool_count: int = 0


class AgentToolsResult(BaseModel):
    tools: list[ToolSpec]
    servers: list[MountState]
    dropped: list[DroppedTool] = Field(
        default_factory=list[DroppedTool], description="Tools not offered to the model (name clash, invalid schema)."
    )
