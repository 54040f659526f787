"""Leaf module: the events a turn emits while it runs, a closed union keyed by `type`.

The loop produces them; `server/streaming.py` turns each into a `notifications/progress`
(one-line message) and, for clients that opted in, a full `notifications/agent_server/event`.
Every event carries the turn's `turn_id`, `session_id` and `trace_id`.
"""

from collections.abc import Awaitable, Callable
from typing import Annotated, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agent_server.types import CompactionRecord, ToolCall, ToolKind, ToolResult, TurnStatus, Usage


class EventIds(TypedDict):
    """The identifiers every event of a turn carries; splat into an event's constructor."""

    turn_id: str
    session_id: str
    trace_id: str


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    turn_id: str
    session_id: str
    trace_id: str


class TurnEvent(_Event):
    """A turn started."""

    type: Literal["turn"] = "turn"
    prompt: str


class StatusEvent(_Event):
    """The loop entered a phase (`compact`, `sampling`, `executing_tools`, `finalizing`)."""

    type: Literal["status"] = "status"
    phase: str
    message: str


class PromptPart(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    id: str
    title: str
    source: str
    tokens: int


class PromptTraceEvent(_Event):
    """The parts the system prompt was built from, with their estimated tokens."""

    type: Literal["prompt_trace"] = "prompt_trace"
    parts: list[PromptPart]
    history_tokens: int
    tool_schema_tokens: int


class TokenEvent(_Event):
    """Text the model produced; consecutive deltas may be coalesced into one event."""

    type: Literal["token"] = "token"
    delta: str


class ToolStartEvent(_Event):
    type: Literal["tool_start"] = "tool_start"
    tool_round: int
    call: ToolCall
    kind: ToolKind = "other"
    """What the tool does (its spec's `kind`), as editors draw the call."""


class ToolRunningEvent(_Event):
    """The call passed its approval gate (or needed none) and its tool runs now. Between its `tool_start` and
    this the call is pending: the user may be asked to approve it."""

    type: Literal["tool_running"] = "tool_running"
    tool_round: int
    call_id: str
    name: str


class ToolProgressEvent(_Event):
    type: Literal["tool_progress"] = "tool_progress"
    call_id: str
    name: str
    progress: float
    total: float | None = None
    message: str | None = None


class ToolResultEvent(_Event):
    type: Literal["tool_result"] = "tool_result"
    tool_round: int
    result: ToolResult


class CompactionEvent(_Event):
    type: Literal["compaction"] = "compaction"
    record: CompactionRecord


class ErrorEvent(_Event):
    type: Literal["error"] = "error"
    error_type: str
    message: str


class DoneEvent(_Event):
    type: Literal["done"] = "done"
    status: TurnStatus
    final_text: str
    usage: Usage


AgentEvent = Annotated[
    TurnEvent
    | StatusEvent
    | PromptTraceEvent
    | TokenEvent
    | ToolStartEvent
    | ToolRunningEvent
    | ToolProgressEvent
    | ToolResultEvent
    | CompactionEvent
    | ErrorEvent
    | DoneEvent,
    Field(discriminator="type"),
]

EventSink = Callable[[AgentEvent], Awaitable[None]]
"""Where a running turn sends its events. A sink that can tell when nothing it is sent reaches anyone has a
`listening()` method saying so (see `listening`)."""


def listening(sink: EventSink) -> bool:
    """Whether an event sent to `sink` now may reach anyone: a turn builds no event when none would (building
    them is a measurable part of a turn's own work). Sinks without a `listening()` method always listen."""
    probe = getattr(sink, "listening", None)
    return True if probe is None else bool(probe())


AGENT_EVENT_ADAPTER: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)
