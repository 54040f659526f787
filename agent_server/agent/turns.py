"""Running one turn end to end: record it as `running`, drive the loop, and persist the outcome.

However the turn ends (answer, limit, model failure, timeout, cancellation) its record and the
history it committed are written in one store transaction, shielded from cancellation, and a
`done` event is emitted. Cancellation is re-raised after the write so the caller's scope ends.
"""

from __future__ import annotations

import logging

import anyio

from agent_server.agent.context import AgentDeps, TurnRequest
from agent_server.agent.loop import drive
from agent_server.agent.turn_state import TurnState
from agent_server.events import DoneEvent, ErrorEvent, EventSink, TurnEvent
from agent_server.types import ErrorInfo, TurnRecord, new_id

logger = logging.getLogger(__name__)


async def run_turn(deps: AgentDeps, request: TurnRequest, emit: EventSink) -> TurnRecord:
    """Run one turn on `request.session_id` and return its persisted record.

    Raises:
        SessionNotFound: the session does not exist.
    """
    state = TurnState(
        turn_id=new_id("turn"),
        session_id=request.session_id,
        trace_id=request.trace_id,
        prompt=request.prompt,
        trace=request.trace,
        model=request.model,
    )
    await deps.store.begin_turn(state.record())
    ids = state.ids()
    try:
        await emit(TurnEvent(prompt=request.prompt, **ids))
        await _drive_with_timeout(deps, request, state, emit)
    except anyio.get_cancelled_exc_class():
        state.finish("cancelled", error=ErrorInfo(type="cancelled", message="the caller cancelled the turn"))
        with anyio.CancelScope(shield=True):
            await _persist(deps, state)
        raise
    except Exception as exc:
        # The turn must never stay `running` because of a bug below us; record it and re-raise.
        state.finish("failed", error=ErrorInfo(type="internal_error", message=f"{type(exc).__name__}: {exc}"))
        with anyio.CancelScope(shield=True):
            await _persist(deps, state)
        raise
    record = await _persist(deps, state)
    if record.error is not None and record.status != "completed":
        _log_ending(record, record.error)
        await emit(ErrorEvent(error_type=record.error.type, message=record.error.message, **ids))
    await emit(DoneEvent(status=record.status, final_text=record.final_text, usage=record.usage, **ids))
    return record


def _log_ending(record: TurnRecord, error: ErrorInfo) -> None:
    """One INFO line per turn that did not complete, so a failure shows in the log at the default level."""
    ending = f"{record.status}: {error.type}: {error.message}"
    logger.info("turn %s on session %s ended %s", record.turn_id, record.session_id, ending)


async def _drive_with_timeout(deps: AgentDeps, request: TurnRequest, state: TurnState, emit: EventSink) -> None:
    timeout = request.timeout_s
    with anyio.move_on_after(timeout) as scope:
        await drive(deps, request, state, emit)
    if scope.cancelled_caught:
        state.transition("running", "finalizing", "timeout")
        message = f"the turn did not finish within timeout_s={timeout:g}"
        state.finish("timed_out", error=ErrorInfo(type="timed_out", message=message))


async def _persist(deps: AgentDeps, state: TurnState) -> TurnRecord:
    state.finish("completed")  # no-op when a status was already set
    record = state.record()
    written = await deps.store.finish_turn(record, state.committed)
    if not written:
        logger.warning(
            "session %s was deleted while turn %s ran; its record was dropped", state.session_id, state.turn_id
        )
    return record
