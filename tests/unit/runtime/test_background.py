"""The background-turn machinery on its own: the bounded event log, following, the registry's bounds."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel
import pytest

from agent_server.errors import InvalidArgument
from agent_server.events import AgentEvent, EventIds, EventSink, StatusEvent, TokenEvent, TurnEvent
from agent_server.runtime.background import (
    DROPPED_PHASE,
    HEARTBEAT_PHASE,
    BackgroundTurns,
    EventLog,
    LogLimits,
    TurnHandle,
)
from agent_server.runtime.park import Park
from agent_server.types import TurnRecord, utc_now

pytestmark = pytest.mark.anyio

IDS: EventIds = {"turn_id": "turn_1", "session_id": "ses_1", "trace_id": "trace_1"}


def _record(turn_id: str = "turn_1") -> TurnRecord:
    return TurnRecord(
        turn_id=turn_id, session_id="ses_1", trace_id="trace_1", status="running", prompt="p", started_at=utc_now()
    )


def _status(n: int) -> StatusEvent:
    return StatusEvent(phase="sampling", message=f"step {n}", **IDS)


def _token(text: str) -> TokenEvent:
    return TokenEvent(delta=text, **IDS)


class Sink:
    def __init__(self) -> None:
        self.events: list[AgentEvent] = []

    async def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)


def test_past_the_count_cap_the_oldest_token_deltas_go_first() -> None:
    log = EventLog(LogLimits(max_events=3, max_bytes=10**6))
    for event in (TurnEvent(prompt="p", **IDS), _token("a"), _status(1), _token("b"), _status(2)):
        log.append(event)
    batch = log.since(0)
    assert [seq for seq, _ in batch.events] == [1, 3, 5]  # both tokens dropped, every other event kept
    assert batch.dropped == 2 and log.dropped == 2 and batch.last_seq == 5


def test_past_the_byte_cap_the_oldest_events_go_but_never_the_latest() -> None:
    one = len(_status(1).model_dump_json())
    log = EventLog(LogLimits(max_events=100, max_bytes=2 * one))
    for n in range(1, 6):
        log.append(_status(n))
    assert [seq for seq, _ in log.since(0).events] == [4, 5]
    huge = EventLog(LogLimits(max_events=100, max_bytes=1))
    huge.append(_status(1))
    assert [seq for seq, _ in huge.since(0).events] == [1]  # one event over the cap alone is still kept


async def test_a_follower_gets_one_marker_for_what_was_dropped_then_the_rest_in_order() -> None:
    handle = TurnHandle(_record(), LogLimits(max_events=2, max_bytes=10**6))
    for n in range(1, 6):
        await handle.append(_status(n))
    handle.finish(_record().model_copy(update={"status": "completed"}))
    sink = Sink()
    with anyio.fail_after(5):
        last = await handle.follow(sink, follower="c1", timeout_s=5)
    first, *rest = sink.events
    assert isinstance(first, StatusEvent) and first.phase == DROPPED_PHASE and first.message.startswith("3 earlier")
    assert [e.message for e in rest if isinstance(e, StatusEvent)] == ["step 4", "step 5"]
    assert last == 5
    again = Sink()
    with anyio.fail_after(5):
        assert await handle.follow(again, follower="c1", timeout_s=5) == 5
    assert again.events == []  # c1 has seen everything; a new follower would start at the first event


async def test_follow_streams_new_events_as_they_come_and_stops_at_its_timeout() -> None:
    handle = TurnHandle(_record(), LogLimits())
    sink = Sink()
    got_one = anyio.Event()

    async def tell(event: AgentEvent) -> None:
        await sink(event)
        got_one.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: handle.follow(tell, follower=None, timeout_s=0.2))
            await handle.append(_status(1))
            await got_one.wait()
    assert [e.type for e in sink.events] == ["status"]
    assert not handle.done


async def _stored(session_id: str, turn_id: str) -> TurnRecord | None:
    return None


def _blocked(gate: anyio.Event) -> Callable[[EventSink], Awaitable[TurnRecord]]:
    async def turn(emit: EventSink) -> TurnRecord:
        await gate.wait()
        return _record().model_copy(update={"status": "completed"})

    return turn


async def test_the_registry_bounds_each_principals_running_turns_and_forgets_old_finished_ones() -> None:
    gate = anyio.Event()
    with anyio.fail_after(5):
        async with BackgroundTurns(_stored, max_running=2, keep_finished=1) as turns:
            first = turns.start(_record("turn_a"), _blocked(gate), principal="alice")
            second = turns.start(_record("turn_b"), _blocked(gate), principal="alice")
            with pytest.raises(InvalidArgument, match="2 of your background turns are running"):
                turns.start(_record("turn_c"), _blocked(gate), principal="alice")
            other = turns.start(_record("turn_d"), _blocked(gate), principal="bob")  # alice's flood is hers alone
            assert (first.principal, other.principal) == ("alice", "bob")
            gate.set()
            await first.wait()
            await second.wait()
            await other.wait()
            kept = [turns.get(turn_id) for turn_id in ("turn_a", "turn_b", "turn_d")]
            assert kept.count(None) == 2  # one finished turn is kept


async def test_turns_that_may_wait_for_their_client_have_a_smaller_room_of_their_own() -> None:
    gate = anyio.Event()
    with anyio.fail_after(5):
        async with BackgroundTurns(_stored, max_running=3, max_parked=1) as turns:
            turns.start(_record("turn_a"), _blocked(gate), Park(timeout_s=60), principal="alice")
            with pytest.raises(InvalidArgument, match="1 of your turns may wait for your answers"):
                turns.start(_record("turn_b"), _blocked(gate), Park(timeout_s=60), principal="alice")
            turns.start(_record("turn_c"), _blocked(gate), principal="alice")  # one that never parks still fits
            turns.start(_record("turn_d"), _blocked(gate), Park(timeout_s=60), principal="bob")
            gate.set()


async def test_leaving_the_registry_cancels_a_running_turn_and_records_it() -> None:
    never = anyio.Event()
    with anyio.fail_after(5):
        async with BackgroundTurns(_stored) as turns:
            handle = turns.start(_record(), _blocked(never))
            await anyio.lowlevel.checkpoint()
    assert handle.done and handle.record.status == "cancelled"
    assert handle.record.error is not None and handle.record.error.type == "cancelled"


async def test_a_cursor_past_the_last_event_still_gets_the_events_that_follow() -> None:
    handle = TurnHandle(_record(), LogLimits())
    await handle.append(_status(1))
    sink = Sink()

    async def then_finish() -> None:
        await handle.append(_status(2))
        handle.finish(_record().model_copy(update={"status": "completed"}))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(then_finish)
            last = await handle.follow(sink, after=99, timeout_s=5)
    assert [e.message for e in sink.events if isinstance(e, StatusEvent)] == ["step 2"] and last == 2


class UntilHeartbeats:
    """A sink that keeps the events and stops its follower (cancels `scope`) after `count` heartbeats."""

    def __init__(self, scope: anyio.CancelScope, count: int) -> None:
        self.events: list[AgentEvent] = []
        self._scope, self._count = scope, count

    async def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)
        beats = [e for e in self.events if isinstance(e, StatusEvent) and e.phase == HEARTBEAT_PHASE]
        if len(beats) >= self._count:
            self._scope.cancel()


async def test_a_turn_that_sends_nothing_gets_heartbeats_in_its_log_so_every_poll_sees_something_new() -> None:
    never = anyio.Event()
    with anyio.fail_after(5):
        async with BackgroundTurns(_stored, heartbeat_s=0.01) as turns:
            handle = turns.start(_record(), _blocked(never))
            with anyio.CancelScope() as scope:
                sink = UntilHeartbeats(scope, 2)
                await handle.follow(sink, timeout_s=5)
            first = handle.log.last_seq
            with anyio.CancelScope() as scope:
                await handle.follow(UntilHeartbeats(scope, 1), after=first, timeout_s=5)
            assert handle.log.last_seq > first  # a second poll (after_event=first) has something new
    beats = [e for e in sink.events if isinstance(e, StatusEvent)]
    assert [e.phase for e in beats] == [HEARTBEAT_PHASE, HEARTBEAT_PHASE]
    assert beats[0].message.startswith("still running: starting (")  # where it is: its stage, before it began


def test_heartbeats_are_dropped_first_with_token_deltas() -> None:
    log = EventLog(LogLimits(max_events=3, max_bytes=10**6))
    beat = StatusEvent(phase=HEARTBEAT_PHASE, message="still running", **IDS)
    for event in (TurnEvent(prompt="p", **IDS), beat, _status(1), beat, _status(2)):
        log.append(event)
    assert [seq for seq, _ in log.since(0).events] == [1, 3, 5]
