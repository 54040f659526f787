"""The state of one running turn: its `TurnRecord` as it grows, and the history it commits.

The record itself is the state: it starts `running` (the row `begin_turn` writes) and each
finished step replaces it with an updated copy (records are immutable, so a record handed out
earlier never changes under its holder). Whoever ends the turn (the loop itself, the timeout, or
the cancellation handler) calls `finish`. `committed` holds the history messages the session
keeps: only whole steps (an assistant message with its tool results, or a final answer), so an
interrupted round never leaves a tool call without its result in the history.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_server.agent.context import TurnRequest
from agent_server.events import EventIds
from agent_server.types import (
    ApprovalRecord,
    AssistantTurn,
    CompactionRecord,
    ErrorInfo,
    InstructionFile,
    Message,
    ToolRound,
    Transition,
    TurnRecord,
    TurnStatus,
    Usage,
    new_id,
    utc_now,
)

Phase = Literal["running", "sampling", "executing_tools", "post_tool_decision", "finalizing"]
"""Where a turn is, as its record's `transitions` name it (`running`: the turn as a whole, which a timeout ends)."""

Reason = Literal[
    "assistant_requested_tools",
    "tool_round_completed",
    "runtime_continuation_after_tools",
    "assistant_finished_without_tools",
    "assistant_cut_at_token_limit",
    "max_tool_passes_reached",
    "model_failed",
    "timeout",
    "answer_not_valid_against_output_schema",
    "output_invalid",
]
"""Why a turn moved from one phase to the next, as its record's `transitions` say."""


@functools.cache
def _transition(src: Phase, dst: Phase, reason: Reason) -> Transition:
    """One step of `transitions` (frozen, so one object per distinct step serves every turn; a handful exist)."""
    return Transition.model_validate({"from": src, "to": dst, "reason": reason})


@dataclass(kw_only=True)
class TurnState:
    record: TurnRecord
    committed: list[Message] = field(default_factory=list[Message])
    on_change: Callable[[TurnRecord], None] | None = None
    """Told each new record (`TurnRequest.on_progress`), so a running turn's progress can be seen."""

    @classmethod
    def begin(cls, request: TurnRequest) -> TurnState:
        """A new turn of `request`, `running` from now."""
        record = TurnRecord(
            turn_id=request.turn_id or new_id("turn"),
            session_id=request.session_id,
            trace_id=request.trace_id,
            status="running",
            prompt=request.prompt,
            trace=request.options.trace,
            model=request.options.model,
            agent=request.options.agent,
            started_at=utc_now(),
        )
        state = cls(record=record, on_change=request.on_progress)
        if state.on_change is not None:
            state.on_change(record)
        return state

    def ids(self) -> EventIds:
        record = self.record
        return {"turn_id": record.turn_id, "session_id": record.session_id, "trace_id": record.trace_id}

    def transition(self, src: Phase, dst: Phase, reason: Reason) -> None:
        self._update(transitions=[*self.record.transitions, _transition(src, dst, reason)])

    def commit(self, messages: list[Message]) -> None:
        """Keep whole messages of this turn in the session's history."""
        self.committed += messages

    def add_assistant_turn(self, turn: AssistantTurn, usage: Usage) -> None:
        """One model response and what it cost."""
        self._update(assistant_turns=[*self.record.assistant_turns, turn], usage=self.record.usage + usage)

    def add_tool_round(self, tool_round: ToolRound) -> None:
        self._update(tool_rounds=[*self.record.tool_rounds, tool_round])

    def add_approval(self, approval: ApprovalRecord) -> None:
        """One call the approval gate settled (kept as it happens, so a turn that times out keeps it too)."""
        self._update(approvals=[*self.record.approvals, approval])

    def add_instructions(self, files: list[InstructionFile]) -> None:
        """Project instruction files the model was given (the system prompt's, a subdirectory's)."""
        self._update(instructions=[*self.record.instructions, *files])

    def compacted(self, compaction: CompactionRecord) -> None:
        """The session was compacted during this turn (the last compaction is the one recorded)."""
        self._update(compaction=compaction)

    def finish(
        self,
        status: TurnStatus,
        *,
        error: ErrorInfo | None = None,
        final_text: str | None = None,
        structured_output: Any = None,
    ) -> None:
        """End the turn; a second call is ignored so the first reason to stop wins."""
        if self.record.finished_at is not None:
            return
        text = self.record.final_text if final_text is None else final_text
        self._update(
            status=status, error=error, final_text=text, structured_output=structured_output, finished_at=utc_now()
        )

    def stored(self, record: TurnRecord) -> None:
        """The turn's final record as the store holds it now (`on_change` is told: from this moment another
        process sharing the store may read it, so whoever follows the turn here must see it too)."""
        self.record = record
        if self.on_change is not None:
            self.on_change(record)

    def _update(self, **changes: Any) -> None:
        # `model_copy` skips validation: every caller above passes values of the field's own type.
        self.record = self.record.model_copy(update=changes)
        if self.on_change is not None and self.record.finished_at is None:  # a finished one: told once stored
            self.on_change(self.record)
