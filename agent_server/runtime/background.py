"""Background turns (DESIGN 3.6): turns that outlive the request that started them.

`BackgroundTurns` owns a task group entered with the runtime; each background turn runs there,
bounded by its own `timeout_s`, and is cancelled (and recorded `cancelled`) when the runtime shuts
down. A `TurnHandle` follows one turn: its latest record, its events, a way to wait and to cancel.

Every turn keeps its events in an `EventLog` so that a follower who comes late still sees the steps
it missed, from the first one. The log is bounded (`max_events`, `max_bytes`): past a cap the oldest
token deltas are dropped first (the record's `final_text` keeps the whole answer), then the oldest
other events; a follower whose next events were dropped gets one `status` event with phase
`events_dropped` saying how many, in their place. Each follower (a connection key, or the caller's
own cursor) resumes after the last event it was sent.

The registry is bounded too, per principal (each turn records the principal that started it): at most
`max_running` background turns of one principal at once, of which at most `max_parked` may wait for their
client through a park (another start is an `InvalidArgument`; another principal's room is untouched), and
the `keep_finished` most recently finished turns stay followable; older ones are only in the store (their
record, without events). No MCP types here.

While it runs, a turn's record is its progress so far (`TurnHandle.progressed`: model calls, tool rounds,
usage), and before it begins its `stage` says what it waits for (`runtime.progress`). When the turn sent no
event for `heartbeat_s`, its log gets a `status` event with phase `heartbeat` saying where it is: a follower
then always has something new (a poll that differs from the last, `last_event` included), and heartbeats are
the first events the log's bounds drop, with token deltas.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from agent_server.errors import CANCELLED, INTERNAL_ERROR, AgentServerError, InvalidArgument
from agent_server.events import AgentEvent, EventIds, EventSink, StatusEvent
from agent_server.runtime.progress import STARTING, elapsed_s, phase_of
from agent_server.types import LOCAL_PRINCIPAL, ErrorInfo, TurnRecord, TurnStatus, utc_now

if TYPE_CHECKING:
    from agent_server.runtime.park import Park

logger = logging.getLogger(__name__)

EVENT_LOG_MAX_EVENTS = 2000
EVENT_LOG_MAX_BYTES = 1_000_000
MAX_RUNNING = 32
MAX_PARKED = 16
KEEP_FINISHED = 64
MAX_FOLLOWERS = 64
"""Per turn: how many followers' cursors are remembered (the oldest is forgotten; it then restarts at 0)."""
DROPPED_PHASE = "events_dropped"
HEARTBEAT_PHASE = "heartbeat"


@dataclass(frozen=True)
class LogLimits:
    max_events: int = EVENT_LOG_MAX_EVENTS
    max_bytes: int = EVENT_LOG_MAX_BYTES


@dataclass(frozen=True)
class Batch:
    """Events after a cursor: `(seq, event)` in order, and how many in that range were dropped."""

    events: list[tuple[int, AgentEvent]]
    dropped: int
    last_seq: int


class EventLog:
    """A turn's events, numbered from 1, within `LogLimits` (see the module docstring)."""

    def __init__(self, limits: LogLimits) -> None:
        self._limits = limits
        self._entries: deque[tuple[int, AgentEvent, int]] = deque()
        self._bytes = 0
        self.last_seq = 0
        self.dropped = 0

    def append(self, event: AgentEvent) -> None:
        size = len(event.model_dump_json())
        self.last_seq += 1
        self._entries.append((self.last_seq, event, size))
        self._bytes += size
        while len(self._entries) > 1 and (
            len(self._entries) > self._limits.max_events or self._bytes > self._limits.max_bytes
        ):
            self._drop_one()

    def _drop_one(self) -> None:
        victim = next((i for i, (_, e, _) in enumerate(self._entries) if _expendable(e)), 0)
        _, _, size = self._entries[victim]
        del self._entries[victim]
        self._bytes -= size
        self.dropped += 1

    def latest(self) -> AgentEvent | None:
        return self._entries[-1][1] if self._entries else None

    def since(self, after: int) -> Batch:
        events = [(seq, event) for seq, event, _ in self._entries if seq > after]
        missing = max(0, self.last_seq - max(after, 0)) - len(events)
        return Batch(events=events, dropped=missing, last_seq=self.last_seq)


def _expendable(event: AgentEvent) -> bool:
    """Token deltas (the record's `final_text` has the whole answer) and heartbeats: dropped first."""
    return event.type == "token" or (event.type == "status" and event.phase == HEARTBEAT_PHASE)


class TurnHandle:
    """One background turn, as its starter and its followers see it."""

    def __init__(
        self,
        record: TurnRecord,
        limits: LogLimits,
        park: Park | None = None,
        principal: str = LOCAL_PRINCIPAL,
        heartbeat_s: float | None = None,
    ) -> None:
        self.turn_id = record.turn_id
        self.session_id = record.session_id
        self.principal = principal
        """Whose turn this is: only that principal finds it (`AgentRuntime.background_turn`)."""
        self._record = record
        self.park = park
        """Where the turn waits for its client's input, when its front door lends it one that way."""
        self.log = EventLog(limits)
        self._limits = limits
        self._scope = anyio.CancelScope()
        self._done = anyio.Event()
        self._changed = anyio.Event()
        self._cursors: OrderedDict[str, int] = OrderedDict()
        self.updated_at = record.started_at
        """When the turn last emitted an event or ended."""
        self.stage: str | None = STARTING
        """What the turn waits for before it begins (`runtime.progress`); None once it has begun."""
        self._heartbeat_s = heartbeat_s
        self._last_event_at = anyio.current_time()
        if park is not None:
            park.bind(on_change=self._input_changed, on_expired=lambda _message: self.cancel())

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def record(self) -> TurnRecord:
        """The latest record: `running` (`awaiting_input` while its park holds requests) until the turn
        ends, then the stored final record."""
        if not self.done and self._record.finished_at is None and self.awaiting_input:
            return self._record.model_copy(update={"status": "awaiting_input"})
        return self._record

    @property
    def where(self) -> str:
        """Where the turn is: its stage before it begins, then the phase its record shows."""
        return self.stage if self.stage is not None else phase_of(self._record)

    def waiting_on(self, what: str) -> None:
        """The turn waits for `what` before it begins (the runtime's wait callback)."""
        self.stage = f"waiting for {what}"
        self._notify()

    def progressed(self, record: TurnRecord) -> None:
        """The running turn's record as it grows (`TurnRequest.on_progress`), then its final record once stored:
        `record` shows that at once, while the turn's task still lets go of its session (a process sharing the
        store may read it already); the turn is `done` when the task has ended (`finish`)."""
        if not self.done:
            self._record = record
            self.stage = None

    @property
    def awaiting_input(self) -> bool:
        return self.park is not None and bool(self.park.pending())

    def _input_changed(self) -> None:
        self.updated_at = utc_now()
        self._notify()

    def next_change(self) -> anyio.Event:
        """An event set at the turn's next change (an event kept, its input requests changed, its end): take it
        before looking at the turn, then wait on it."""
        return self._changed

    async def wait_for_input(self, timeout_s: float | None = None) -> bool:
        """Wait until the turn ends or waits for its client's input (`timeout_s` at most); True if it waits."""
        with anyio.move_on_after(timeout_s if timeout_s is not None else float("inf")):
            while not self.done and not self.awaiting_input:
                await self._changed.wait()
        return not self.done and self.awaiting_input

    def ids(self) -> EventIds:
        return {"turn_id": self.turn_id, "session_id": self.session_id, "trace_id": self.record.trace_id}

    async def append(self, event: AgentEvent) -> None:
        """The turn's event sink: keep the event and wake the followers."""
        self.log.append(event)
        self.updated_at = utc_now()
        self._last_event_at = anyio.current_time()
        self._notify()

    async def _beat(self, interval: float) -> None:
        """Until cancelled: a heartbeat event whenever the turn sent none for `interval` (module docstring)."""
        while True:
            await anyio.sleep_until(self._last_event_at + interval)
            if anyio.current_time() - self._last_event_at < interval:
                continue  # an event came meanwhile
            message = f"still running: {self.where} ({elapsed_s(self._record):.0f} s)"
            await self.append(StatusEvent(phase=HEARTBEAT_PHASE, message=message, **self.ids()))

    def finish(self, record: TurnRecord) -> None:
        self._record = record
        self.updated_at = record.finished_at or utc_now()
        self._done.set()
        self._notify()

    def _notify(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    def cancel(self) -> None:
        """Ask the turn to stop; it records itself `cancelled` (see `wait`)."""
        self._scope.cancel()

    async def wait(self, timeout_s: float | None = None) -> TurnRecord:
        """The final record, or the `running` one when `timeout_s` passes first."""
        with anyio.move_on_after(timeout_s if timeout_s is not None else float("inf")):
            await self._done.wait()
        return self.record

    async def follow(
        self,
        sink: EventSink,
        *,
        follower: str | None = None,
        after: int | None = None,
        timeout_s: float,
        until_input: bool = False,
    ) -> int:
        """Send `sink` this turn's events after `after` (default: the last one `follower` was sent, or the
        start), as they come, until the turn ends or `timeout_s` passes (or, with `until_input`, the turn
        waits for its client's input: every event before that is sent). Returns the last event's number
        sent; `follower`'s cursor moves with each event, also when the caller is cancelled midway."""
        # A cursor past the last event means "everything so far": later events are never skipped.
        cursor = min(self._cursor(follower) if after is None else after, self.log.last_seq)
        with anyio.move_on_after(timeout_s):
            while True:
                changed = self._changed
                batch = self.log.since(cursor)
                if batch.dropped:
                    await sink(self._dropped_marker(batch.dropped))
                for seq, event in batch.events:
                    await sink(event)
                    cursor = seq
                    self._remember(follower, seq)
                if batch.dropped or batch.events:
                    cursor = max(cursor, batch.last_seq)
                    self._remember(follower, cursor)
                    continue
                if self.done or (until_input and self.awaiting_input):
                    break
                await changed.wait()
        return cursor

    def _cursor(self, follower: str | None) -> int:
        return 0 if follower is None else self._cursors.get(follower, 0)

    def _remember(self, follower: str | None, seq: int) -> None:
        if follower is None:
            return
        self._cursors[follower] = seq
        self._cursors.move_to_end(follower)
        while len(self._cursors) > MAX_FOLLOWERS:
            self._cursors.popitem(last=False)

    def _dropped_marker(self, count: int) -> StatusEvent:
        limits = self._limits
        message = (
            f"{count} earlier event(s) of this turn were dropped: a turn keeps at most {limits.max_events} events "
            f"and {limits.max_bytes} bytes of them, dropping token text first (final_text has the whole answer)"
        )
        return StatusEvent(phase=DROPPED_PHASE, message=message, **self.ids())

    async def run(
        self,
        turn: Callable[[EventSink], Awaitable[TurnRecord]],
        stored: StoredRecord,
        write: WriteRecord | None = None,
    ) -> None:
        """Run the turn to its end in this task; never raises but for the runtime's own cancellation."""
        record: TurnRecord | None = None
        ending = self._ended("cancelled", _NOT_BEGUN)
        try:
            with self._scope:
                record = await self._beating(turn)
        except Exception as exc:  # the turn's own failures are in its record; this is what happened before it
            logger.exception("background turn %s failed", self.turn_id)
            error_type = exc.type if isinstance(exc, AgentServerError) else INTERNAL_ERROR
            message = exc.message if isinstance(exc, AgentServerError) else f"{type(exc).__name__}: {exc}"
            ending = self._ended("failed", ErrorInfo(type=error_type, message=message))
        finally:
            self.finish(record or await self._unfinished(stored, write, ending))

    async def _beating(self, turn: Callable[[EventSink], Awaitable[TurnRecord]]) -> TurnRecord:
        """`turn`, with heartbeats while it runs (none without `heartbeat_s`)."""
        if self._heartbeat_s is None:
            return await turn(self.append)
        try:
            ended: list[TurnRecord] = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._beat, self._heartbeat_s)
                ended.append(await turn(self.append))
                tg.cancel_scope.cancel()
            return ended[0]
        except BaseExceptionGroup as group:  # the task group wraps what the turn raised
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from group.exceptions[0].__cause__
            raise

    async def _unfinished(self, stored: StoredRecord, write: WriteRecord | None, ending: TurnRecord) -> TurnRecord:
        """The record of a turn that did not return one: the one it stored itself before it raised (it
        began), else `ending`, stored in place of its `running` record (it never began). Shielded."""
        with anyio.CancelScope(shield=True):
            record = await stored(self.session_id, self.turn_id)
            if record is not None and record.status != "running":
                return record
            if write is not None:
                await write(ending)
        return ending

    def _ended(self, status: TurnStatus, error: ErrorInfo) -> TurnRecord:
        return self._record.model_copy(update={"status": status, "error": error, "finished_at": utc_now()})


_NOT_BEGUN = ErrorInfo(type=CANCELLED, message="the turn was cancelled before it began")

StoredRecord = Callable[[str, str], Awaitable[TurnRecord | None]]
"""`(session_id, turn_id)` -> the stored record, or None."""
WriteRecord = Callable[[TurnRecord], Awaitable[None]]
"""Store the final record of a turn that ended before it began (never raises)."""


class BackgroundTurns:
    """The registry of background turns and the task group they run in (see the module docstring)."""

    def __init__(
        self,
        stored: StoredRecord,
        *,
        write: WriteRecord | None = None,
        limits: LogLimits | None = None,
        max_running: int = MAX_RUNNING,
        max_parked: int = MAX_PARKED,
        keep_finished: int = KEEP_FINISHED,
        heartbeat_s: float | None = None,
    ) -> None:
        self._stored = stored
        self._heartbeat_s = heartbeat_s
        self._write = write
        self._limits = limits or LogLimits()
        self._max_running = max_running
        self._max_parked = max_parked
        self._keep_finished = keep_finished
        self._turns: OrderedDict[str, TurnHandle] = OrderedDict()
        self._group: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> BackgroundTurns:
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._group is not None
        self._group.cancel_scope.cancel()  # shutdown: every background turn records itself `cancelled`
        return await self._group.__aexit__(exc_type, exc, tb)

    def get(self, turn_id: str) -> TurnHandle | None:
        return self._turns.get(turn_id)

    def start_service(self, service: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run `service` in the task group until the runtime shuts down (e.g. the store's notifications)."""
        if self._group is None:
            raise RuntimeError("the runtime was not entered")
        self._group.start_soon(service)

    def start(
        self,
        record: TurnRecord,
        turn: Callable[[EventSink], Awaitable[TurnRecord]],
        park: Park | None = None,
        *,
        principal: str = LOCAL_PRINCIPAL,
    ) -> TurnHandle:
        """Run `turn` in the background for `principal` (`admit`, then `launch`).

        Raises:
            InvalidArgument: the principal has no room for it (`check_room`).
        """
        handle = self.admit(record, park, principal=principal)
        self.launch(handle, turn)
        return handle

    def admit(self, record: TurnRecord, park: Park | None = None, *, principal: str = LOCAL_PRINCIPAL) -> TurnHandle:
        """Take a place for a turn of `principal` (it counts from now on); `record` is its `running` record
        until it ends; `park` is where it waits for its client (cancelled when the park gives up on the client).
        Then `launch` it, or `withdraw` it if it cannot begin.

        Raises:
            InvalidArgument: the principal has no room for it (`check_room`).
        """
        if self._group is None:
            raise RuntimeError("the runtime was not entered")
        self.check_room(principal, parked=park is not None)
        handle = TurnHandle(record, self._limits, park, principal, self._heartbeat_s)
        self._turns[handle.turn_id] = handle
        return handle

    def launch(self, handle: TurnHandle, turn: Callable[[EventSink], Awaitable[TurnRecord]]) -> None:
        """Run an admitted turn in the task group."""
        if self._group is None:
            raise RuntimeError("the runtime was not entered")
        self._group.start_soon(self._run, handle, turn)

    def withdraw(self, handle: TurnHandle) -> None:
        """Give up the place of an admitted turn that was never launched."""
        if self._turns.get(handle.turn_id) is handle:
            del self._turns[handle.turn_id]

    def check_room(self, principal: str, *, parked: bool = False) -> None:
        """Raise `InvalidArgument` when `principal` runs `max_running` background turns already or, for a turn
        that may wait for its client (`parked`: it has a park), `max_parked` such turns."""
        mine = [handle for handle in self._turns.values() if handle.principal == principal and not handle.done]
        if len(mine) >= self._max_running:
            raise InvalidArgument(
                f"{len(mine)} of your background turns are running already (the limit, limits.background_turns):"
                " wait for one or cancel it"
            )
        waiting = sum(1 for handle in mine if handle.park is not None)
        if parked and waiting >= self._max_parked:
            raise InvalidArgument(
                f"{waiting} of your turns may wait for your answers already (the limit, limits.parked_turns):"
                " answer or cancel one of them first"
            )

    async def _run(self, handle: TurnHandle, turn: Callable[[EventSink], Awaitable[TurnRecord]]) -> None:
        try:
            await handle.run(turn, self._stored, self._write)
        finally:
            self._forget_old()

    def _forget_old(self) -> None:
        finished = [turn_id for turn_id, handle in self._turns.items() if handle.done]
        for turn_id in finished[: max(0, len(finished) - self._keep_finished)]:
            del self._turns[turn_id]
