"""Leaf module: the hooks a turn reports its steps through, and the null ones used while tracing is off.

The runtime picks the implementation (`agent_server.tracing`, OpenTelemetry, when tracing is on; `NO_TELEMETRY`
otherwise) and hands it to the loop in `AgentDeps`; the loop calls the hooks and never knows which it has.
The null hooks are shared objects whose methods do nothing, so a turn with tracing off pays a few attribute
lookups and nothing else (`bench/tracing_cost.py`). No OpenTelemetry import here.

What is traced, and where:

- a turn (`Telemetry.turn`): begun by the runtime when the call arrives, current while the loop runs, ended
  with the turn's record; model calls are traced by a wrapper of the model client (`agent_server.tracing`);
- a tool call (`Telemetry.tool`), from the moment the model's call is taken up, approval included, to its result;
- a compaction (`Telemetry.compaction`), with the model call that summarised, if any, inside it;
- an approval (`Telemetry.approval`), told once the gate decided, with how long it waited.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from types import TracebackType
from typing import Protocol

from agent_server.trace_context import TraceContext
from agent_server.types import ApprovalRecord, CompactionRecord, ToolCall, ToolResult, TurnRecord


class TurnTrace(Protocol):
    """One turn's trace (its span), begun before the turn waits for anything."""

    @property
    def trace_id(self) -> str | None:
        """The trace's id (32 hex digits) when the turn is traced; None otherwise."""
        ...

    def running(self) -> AbstractContextManager[object]:
        """Make the turn's span the current one in this task while the loop runs (an exception is recorded)."""
        ...

    def began(self, *, session_id: str, turn_id: str) -> None:
        """The turn's session and id, once they are known."""
        ...

    def finish(self, record: TurnRecord) -> None:
        """How the turn ended, from its stored record."""
        ...

    def end(self) -> None:
        """End the span (idempotent); nothing is recorded after."""
        ...


class ToolTrace(Protocol):
    def ended(self, result: ToolResult, /) -> None: ...


class CompactionTrace(Protocol):
    def ended(self, record: CompactionRecord, /) -> None: ...


class Telemetry(Protocol):
    def turn(self, parent: TraceContext | None, *, model: str | None = None) -> TurnTrace:
        """Begin a turn's trace: a child of `parent` (the caller's), else of whatever span is current."""
        ...

    def tool(self, call: ToolCall) -> AbstractContextManager[ToolTrace]:
        """Trace one tool call while the block runs; its span is current inside (mounted calls carry it on)."""
        ...

    def compaction(self, session_id: str, reason: str) -> AbstractContextManager[CompactionTrace]: ...

    def approval(self, record: ApprovalRecord) -> None:
        """An approval the gate decided just now, `record.latency_s` after it began."""
        ...


class _Nothing:
    """Every null hook at once: a trace that records nothing and is its own (reusable) context manager."""

    trace_id: str | None = None

    def __enter__(self) -> _Nothing:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def running(self) -> _Nothing:
        return self

    def began(self, *, session_id: str, turn_id: str) -> None:
        return None

    def finish(self, record: TurnRecord) -> None:
        return None

    def end(self) -> None:
        return None

    def ended(self, value: object, /) -> None:
        return None


class _NoTelemetry:
    """`Telemetry` that traces nothing (tracing off)."""

    def turn(self, parent: TraceContext | None, *, model: str | None = None) -> TurnTrace:
        return _NOTHING

    def tool(self, call: ToolCall) -> AbstractContextManager[ToolTrace]:
        return _NOTHING

    def compaction(self, session_id: str, reason: str) -> AbstractContextManager[CompactionTrace]:
        return _NOTHING

    def approval(self, record: ApprovalRecord) -> None:
        return None


_NOTHING = _Nothing()
NO_TELEMETRY: Telemetry = _NoTelemetry()


def turn_trace_id(traced: TurnTrace, caller: TraceContext | None, given: str | None) -> str | None:
    """The one rule for a turn record's `trace_id`: the turn span's trace when it is traced (so the record
    finds its trace), else the caller's `traceparent`'s, else the id the caller gave (`_meta.trace_id`);
    None: the runtime makes one up."""
    return traced.trace_id or (caller.trace_id if caller is not None else None) or given
