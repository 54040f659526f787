"""What a running turn has done so far, in words: the one place every front door's running text comes from.

A running turn reports each new state of its record (`TurnRequest.on_progress`), and the runtime keeps the
latest one of every turn that runs in this process (`AgentRuntime.find_turn`, `list_turns`, a background
turn's `TurnHandle.record`): a `running` record then carries its model calls, tool rounds and usage so far.
A turn another process runs (a replica on a shared store, another server on the same state dir) is seen as
its stored `running` record: the one written when it began, without its progress.

The texts say what changed between two looks at a turn (where it is, its counts, its elapsed time), so
that successive polls of a host's model never read the same (a host may take identical results, or calls,
for a loop). No MCP types here.
"""

from __future__ import annotations

from datetime import UTC, datetime

from agent_server.types import TurnRecord

STARTING = "starting"
"""A background turn's stage before it does anything (its task has not run yet)."""
MOUNTS = "mounted MCP servers to start"
EARLIER_TURN = "an earlier turn of this session to finish"
"""What a call waits for before its turn begins (the runtime's wait callback, the heartbeat's words)."""
WAITING_MOUNTS = f"waiting for {MOUNTS}"
QUEUED = f"waiting for {EARLIER_TURN}"
"""A background turn's stages while it waits (`TurnHandle.stage`)."""
ELSEWHERE = (
    "it runs in another server process: this is its record as that process last stored it (its progress is "
    "written at most every view.progress_interval_s)"
)


def phase_of(record: TurnRecord) -> str:
    """Where a turn that has begun is, read from its record (the loop records each step's transition)."""
    if record.finished_at is not None:
        return "storing its record"
    last = record.transitions[-1].to if record.transitions else "sampling"
    if last == "executing_tools":
        return f"running the tool calls of round {len(record.tool_rounds) + 1}"
    if last == "finalizing":
        return "storing its record"
    return f"waiting for the model (call {len(record.assistant_turns) + 1})"


def elapsed_s(record: TurnRecord, now: datetime | None = None) -> float:
    """Seconds since the record's `started_at` (0 when it does not parse)."""
    try:
        started = datetime.fromisoformat(record.started_at)
    except ValueError:
        return 0.0
    return max(0.0, ((now or datetime.now(UTC)) - started).total_seconds())


def counts(record: TurnRecord, now: datetime | None = None) -> str:
    """The turn's progress so far: `3 model calls, 5 tool calls in 2 rounds, 12,345 tokens, 61.2 s`."""
    calls = sum(len(tool_round.tool_results) for tool_round in record.tool_rounds)
    rounds = len(record.tool_rounds)
    parts = [
        _plural(len(record.assistant_turns), "model call"),
        _plural(calls, "tool call") + (f" in {_plural(rounds, 'round')}" if rounds else ""),
    ]
    tokens = record.usage.total_tokens
    if tokens is not None:
        parts.append(f"{tokens:,} tokens")
    if record.usage.cost_usd is not None:
        parts.append(f"${record.usage.cost_usd:.4f}")
    parts.append(f"{elapsed_s(record, now):.1f} s")
    return ", ".join(parts)


def status_line(record: TurnRecord, where: str) -> str:
    """One line for a status message: where the turn is (`where`: a stage, a phase or the latest step), then
    its counts so far."""
    return f"{where} ({counts(record)})"


def running_text(record: TurnRecord, *, where: str | None = None, last_event: int | None = None) -> str:
    """The text of a `running` result: where the turn is (default: read from the record), its progress so far,
    and how to go on following it (with `last_event`, the `turn_wait` argument that continues after it: a
    call that differs from the previous one)."""
    follow = (
        "Follow it with turn_wait or turn_get"
        if last_event is None
        else f"Go on with turn_wait(after_event={last_event}) (the events after those this result saw) or turn_get"
    )
    return (
        f"[turn running] turn {record.turn_id} of session {record.session_id}: {where or phase_of(record)}; "
        f"so far {counts(record)}. {follow}; stop it with turn_cancel"
    )


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")
