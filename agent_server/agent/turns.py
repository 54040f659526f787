"""Running one turn end to end: record it as `running`, drive the loop, and persist the outcome.

However the turn ends (answer, limit, model failure, timeout, cancellation) its record and the
history it committed are written in one store transaction, shielded from cancellation, and a
`done` event is emitted. Cancellation is re-raised after the write so the caller's scope ends.
"""

from __future__ import annotations

import logging
import math

import anyio
import anyio.lowlevel

from agent_server.agent.context import AgentDeps, TurnRequest
from agent_server.agent.loop import drive
from agent_server.agent.turn_state import TurnState
from agent_server.errors import CANCELLED, INTERNAL_ERROR, STORE_ERROR, TIMED_OUT, AgentServerError, TurnLockLost
from agent_server.events import DoneEvent, ErrorEvent, EventSink, TurnEvent, listening
from agent_server.types import ErrorInfo, SessionHistory, TurnRecord, utc_now

logger = logging.getLogger(__name__)

RECORD_ERROR_MAX_CHARS = 300
"""How much of the store's error a fallback record quotes."""


async def run_turn(deps: AgentDeps, request: TurnRequest, emit: EventSink) -> TurnRecord:
    """Run one turn on `request.session_id` and return its persisted record.

    Raises:
        SessionNotFound: the session does not exist.
    """
    state = TurnState.begin(request)
    store = deps.store
    history = await store.begin_turn(state.record, stored=request.begun)
    ids = state.ids()
    try:
        if listening(emit):
            await emit(TurnEvent(prompt=request.prompt, **ids))
        await _drive_keeping_progress(deps, request, state, emit, history)
    except anyio.get_cancelled_exc_class():
        state.finish("cancelled", error=ErrorInfo(type=CANCELLED, message=_cancel_message(request)))
        with anyio.CancelScope(shield=True):
            await _persist(deps, state)
        raise
    except Exception as exc:
        # The turn must never stay `running` because of a bug below us; record it and re-raise.
        state.finish("failed", error=ErrorInfo(type=INTERNAL_ERROR, message=f"{type(exc).__name__}: {exc}"))
        with anyio.CancelScope(shield=True):
            await _persist(deps, state)
        raise
    record = await _persist(deps, state)
    if record.error is not None and record.status != "completed":
        _log_ending(record, record.error)
        await emit(ErrorEvent(error_type=record.error.type, message=record.error.message, **ids))
    if listening(emit):
        await emit(DoneEvent(status=record.status, final_text=record.final_text, usage=record.usage, **ids))
    return record


def _cancel_message(request: TurnRequest) -> str:
    reason = request.cancel_reason() if request.cancel_reason is not None else None
    return reason or "the caller cancelled the turn"


def _log_ending(record: TurnRecord, error: ErrorInfo) -> None:
    """One INFO line per turn that did not complete, so a failure shows in the log at the default level."""
    ending = f"{record.status}: {error.type}: {error.message}"
    logger.info("turn %s on session %s ended %s", record.turn_id, record.session_id, ending)


async def _drive_keeping_progress(
    deps: AgentDeps, request: TurnRequest, state: TurnState, emit: EventSink, history: SessionHistory
) -> None:
    """`_drive_with_timeout`, with the record written to the store as it goes by the runtime's progress keeper
    (`agent.progress`), when it has one."""
    keeper = deps.progress
    if keeper is None:
        await _drive_with_timeout(deps, request, state, emit, history)
        return
    with keeper.watching(deps.store, state):
        await _drive_with_timeout(deps, request, state, emit, history)


async def _drive_with_timeout(
    deps: AgentDeps, request: TurnRequest, state: TurnState, emit: EventSink, history: SessionHistory
) -> None:
    with anyio.CancelScope(deadline=_deadline(request)) as scope:
        await anyio.lowlevel.checkpoint()  # a deadline that passed while the call was queued ends the turn here
        await drive(deps, request, state, emit, history)
    if scope.cancelled_caught:
        state.transition("running", "finalizing", "timeout")
        limit = f"timeout_s={request.timeout_s:g}" if request.timeout_s is not None else "its deadline"
        message = f"the turn did not finish within {limit} (counted from the call's arrival, queueing included)"
        state.finish("timed_out", error=ErrorInfo(type=TIMED_OUT, message=message))


def _deadline(request: TurnRequest) -> float:
    if request.deadline is not None:
        return request.deadline
    return math.inf if request.timeout_s is None else anyio.current_time() + request.timeout_s


async def _persist(deps: AgentDeps, state: TurnState) -> TurnRecord:
    """Write the turn's record and history; if that fails, a minimal `failed` record in its place.

    The fallback keeps the turn from staying `running` when its record cannot be stored (it cannot
    be serialised, or the disk is full): it drops the turn's history messages, which are what
    could not be written. If the fallback fails as well the error propagates, and the turn stays
    `running` until this process exits; the next server start then marks it `interrupted`.
    """
    state.finish("completed")  # no-op when a status was already set
    record = state.record
    try:
        written = await deps.store.finish_turn(record, state.committed)
    except TurnLockLost:
        raise  # the store wrote the turn's own record (`failed`); nothing else of it may be written now
    except Exception as exc:
        logger.exception("could not store turn %s; storing a minimal record instead", record.turn_id)
        record = _unstored(record, exc)
        written = await deps.store.finish_turn(record, [])
    if not written:
        logger.warning(
            "session %s was deleted while turn %s ran; its record was dropped", record.session_id, record.turn_id
        )
    state.stored(record)
    return record


def _unstored(record: TurnRecord, exc: Exception) -> TurnRecord:
    """The minimal record of a turn whose full record could not be stored."""
    reason = exc.message if isinstance(exc, AgentServerError) else f"{type(exc).__name__}: {exc}"
    message = f"the turn's record could not be stored ({reason[:RECORD_ERROR_MAX_CHARS]}); its history was not kept"
    return TurnRecord(
        turn_id=record.turn_id,
        session_id=record.session_id,
        trace_id=record.trace_id,
        status="failed",
        prompt=record.prompt,
        usage=record.usage,
        error=ErrorInfo(type=STORE_ERROR, message=message),
        trace=record.trace,
        model=record.model,
        started_at=record.started_at,
        finished_at=record.finished_at or utc_now(),
    )
