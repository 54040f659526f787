"""The mutable state of one running turn, and the immutable record it becomes.

The loop appends to it as steps finish; whoever ends the turn (the loop itself, the timeout,
or the cancellation handler) calls `finish`, and `record()` gives the `TurnRecord` to persist.
`committed` holds the history messages the session keeps: only whole steps (an assistant
message with its tool results, or a final answer), so an interrupted round never leaves a
tool call without its result in the history.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_server.events import EventIds
from agent_server.types import (
    AssistantTurn,
    CompactionRecord,
    ErrorInfo,
    Message,
    ToolRound,
    TraceMode,
    Transition,
    TurnRecord,
    TurnStatus,
    Usage,
    utc_now,
)


@dataclass(kw_only=True)
class TurnState:
    turn_id: str
    session_id: str
    trace_id: str
    prompt: str
    trace: TraceMode
    model: str | None
    started_at: str = field(default_factory=utc_now)
    status: TurnStatus = "running"
    final_text: str = ""
    assistant_turns: list[AssistantTurn] = field(default_factory=list[AssistantTurn])
    tool_rounds: list[ToolRound] = field(default_factory=list[ToolRound])
    transitions: list[Transition] = field(default_factory=list[Transition])
    usage: Usage = field(default_factory=Usage)
    compaction: CompactionRecord | None = None
    error: ErrorInfo | None = None
    finished_at: str | None = None
    committed: list[Message] = field(default_factory=list[Message])

    def ids(self) -> EventIds:
        return {"turn_id": self.turn_id, "session_id": self.session_id, "trace_id": self.trace_id}

    def transition(self, src: str, dst: str, reason: str) -> None:
        self.transitions.append(Transition.model_validate({"from": src, "to": dst, "reason": reason}))

    def finish(self, status: TurnStatus, *, error: ErrorInfo | None = None, final_text: str | None = None) -> None:
        """End the turn; a second call is ignored so the first reason to stop wins."""
        if self.finished_at is not None:
            return
        self.status = status
        self.error = error
        if final_text is not None:
            self.final_text = final_text
        self.finished_at = utc_now()

    def record(self) -> TurnRecord:
        return TurnRecord(
            turn_id=self.turn_id,
            session_id=self.session_id,
            trace_id=self.trace_id,
            status=self.status,
            prompt=self.prompt,
            final_text=self.final_text,
            assistant_turns=list(self.assistant_turns),
            tool_rounds=list(self.tool_rounds),
            transitions=list(self.transitions),
            usage=self.usage,
            compaction=self.compaction,
            error=self.error,
            trace=self.trace,
            model=self.model,
            started_at=self.started_at,
            finished_at=self.finished_at,
        )
