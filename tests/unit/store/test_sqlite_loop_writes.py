"""SqliteStore's small writes on the event loop: they never wait there, and fall back to a worker thread."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from anyio import wait_all_tasks_blocked

from agent_server.store import sqlite as sqlite_store
from agent_server.store._history_cache import HistoryCache
from agent_server.store._loop_writes import LOOP_WRITE_MAX_CHARS, turn_fits
from agent_server.store._sqlite_db import BUSY_FAIL, BUSY_WAIT
from agent_server.store.sqlite import SqliteStore
from agent_server.types import Message, ToolCall, ToolResult, ToolRound, TurnRecord
from tests.unit.store.helpers import completed, exchange, running

pytestmark = pytest.mark.anyio


class Hops:
    """Counts the store's worker-thread hops (`anyio.to_thread.run_sync` as the store module sees it)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        shipped = anyio.to_thread.run_sync

        async def counted(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return await shipped(fn, *args, **kwargs)

        monkeypatch.setattr(sqlite_store.anyio.to_thread, "run_sync", counted)


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> Hops:
    return Hops(monkeypatch)


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every SQL statement the stores opened from now on run (SQLite's trace callback)."""
    traced: list[str] = []
    shipped = sqlite_store.connect

    def connect(path: Path) -> sqlite3.Connection:
        conn = shipped(path)
        conn.set_trace_callback(traced.append)
        return conn

    monkeypatch.setattr(sqlite_store, "connect", connect)
    return traced


@pytest.fixture
def write_lock(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    """A second connection to the state dir's database, as another process would hold it."""
    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None, check_same_thread=False)
    yield conn
    conn.close()


async def test_a_small_turn_starts_and_ends_on_the_event_loop(tmp_path: Path, hops: Hops) -> None:
    store = await SqliteStore.open(tmp_path)
    session = await store.create_session(title="t", metadata={})
    record = running(session.session_id)
    before = hops.count
    await store.begin_turn(record)
    assert await store.finish_turn(completed(record), exchange("q", "a"))
    history = await store.begin_turn(running(session.session_id))
    assert hops.count == before
    assert [m.message.text() for m in history.messages] == ["q", "a"]
    await store.close()


async def test_a_turn_waits_in_a_worker_thread_while_another_connection_holds_the_write_lock(
    tmp_path: Path, write_lock: sqlite3.Connection
) -> None:
    store = await SqliteStore.open(tmp_path)
    session = await store.create_session(title="t", metadata={})
    record = running(session.session_id)
    write_lock.execute("BEGIN IMMEDIATE")
    write_lock.execute("UPDATE sessions SET title = 'held' WHERE session_id = ?", (session.session_id,))
    began: list[bool] = []

    async def begin() -> None:
        await store.begin_turn(record)
        began.append(True)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(begin)
            await wait_all_tasks_blocked()  # the attempt on the loop met SQLITE_BUSY; the thread waits
            assert began == []
            write_lock.execute("COMMIT")
    assert began == [True]
    assert (await store.get_turn(session.session_id, record.turn_id)).status == "running"
    assert (await store.get_session(session.session_id)).title == "held"
    await store.close()


async def test_a_finish_waits_for_the_write_lock_too_and_writes_everything(
    tmp_path: Path, write_lock: sqlite3.Connection
) -> None:
    store = await SqliteStore.open(tmp_path)
    session = await store.create_session(title="t", metadata={})
    record = running(session.session_id)
    await store.begin_turn(record)
    write_lock.execute("BEGIN IMMEDIATE")
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(store.finish_turn, completed(record), exchange("q", "a"))
            await wait_all_tasks_blocked()
            write_lock.execute("COMMIT")
    assert (await store.get_turn(session.session_id, record.turn_id)).status == "completed"
    assert len((await store.load_history(session.session_id)).messages) == 2
    await store.close()


async def test_a_history_too_large_for_the_loop_is_read_whole_in_a_worker_thread(tmp_path: Path, hops: Hops) -> None:
    store = await SqliteStore.open(tmp_path)
    session = await store.create_session(title="t", metadata={})
    first = running(session.session_id)
    await store.begin_turn(first)
    long_answer = "x" * (LOOP_WRITE_MAX_CHARS + 1)
    assert await store.finish_turn(completed(first), exchange("q", long_answer))
    before = hops.count
    history = await store.begin_turn(running(session.session_id))
    assert hops.count == before + 1
    assert [m.message.text() for m in history.messages] == ["q", long_answer]
    await store.close()


async def test_a_large_final_record_is_written_in_a_worker_thread(tmp_path: Path, hops: Hops) -> None:
    store = await SqliteStore.open(tmp_path)
    session = await store.create_session(title="t", metadata={})
    record = running(session.session_id)
    await store.begin_turn(record)
    before = hops.count
    assert await store.finish_turn(completed(record), exchange("q", "y" * (LOOP_WRITE_MAX_CHARS + 1)))
    assert hops.count == before + 1
    await store.close()


async def test_the_store_checkpoints_in_a_worker_thread_every_so_many_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoints: list[bool] = []
    shipped = sqlite_store.checkpoint

    def counted(conn: sqlite3.Connection) -> int:
        checkpoints.append(True)
        return shipped(conn)

    monkeypatch.setattr(sqlite_store, "checkpoint", counted)
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY_WRITES", 3)
    store = await SqliteStore.open(tmp_path)
    for _ in range(7):
        await store.create_session(title="t", metadata={})
    assert len(checkpoints) == 2
    await store.close()


class HeldCheckpoint:
    """`checkpoint` as the store module sees it, held in its worker thread until `release`d; counts its calls."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        self.started = threading.Event()
        self._release = threading.Event()
        shipped = sqlite_store.checkpoint

        def held(conn: sqlite3.Connection) -> int:
            self.calls += 1
            self.started.set()
            self._release.wait(10)
            return shipped(conn)

        monkeypatch.setattr(sqlite_store, "checkpoint", held)

    def release(self) -> None:
        self._release.set()


async def test_a_running_checkpoint_leaves_the_writes_on_the_loop_and_runs_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hops: Hops
) -> None:
    held = HeldCheckpoint(monkeypatch)
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY_WRITES", 2)
    store = await SqliteStore.open(tmp_path)

    async def create() -> None:
        await store.create_session(title="t", metadata={})

    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                await create()
                tg.start_soon(create)  # the second write: its checkpoint is due
                await anyio.to_thread.run_sync(held.started.wait)
                before = hops.count
                for _ in range(4):  # the checkpoint runs meanwhile (on a connection of its own)
                    await create()
                assert hops.count == before  # none sent to a worker thread, none waiting for it
                held.release()
        assert held.calls == 1  # the writes past the count while it ran started no second one
    finally:
        held.release()
        await store.close()


@pytest.mark.parametrize(
    ("reason", "code", "level"),
    [
        ("disk I/O error", sqlite3.SQLITE_IOERR, logging.WARNING),
        ("database is locked", sqlite3.SQLITE_BUSY, logging.DEBUG),
    ],
)
async def test_a_failed_checkpoint_fails_no_write_and_is_logged(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    reason: str,
    code: int,
    level: int,
) -> None:
    """Another process checkpointing at the same moment (busy) is logged at DEBUG only."""

    def failing(conn: sqlite3.Connection) -> int:
        exc = sqlite3.OperationalError(reason)
        exc.sqlite_errorcode = code
        raise exc

    monkeypatch.setattr(sqlite_store, "checkpoint", failing)
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY_WRITES", 1)
    caplog.set_level(logging.DEBUG, logger=sqlite_store.__name__)
    store = await SqliteStore.open(tmp_path)
    try:
        session = await store.create_session(title="t", metadata={})
        assert (await store.get_session(session.session_id)).title == "t"
        logged = [r for r in caplog.records if "could not checkpoint the session store" in r.getMessage()]
        assert logged and {r.levelno for r in logged} == {level}
        assert reason in logged[0].getMessage()
    finally:
        await store.close()


async def test_a_checkpoint_of_a_wal_past_the_bound_runs_again_holding_the_store_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The WAL starts over only after a checkpoint that copied every frame: with the WAL past
    `WAL_CATCH_UP_FRAMES`, the checkpoint runs again with this process's writes held back."""
    store = await SqliteStore.open(tmp_path)
    held: list[bool] = []
    shipped = sqlite_store.checkpoint

    def overtaken(conn: sqlite3.Connection) -> int:
        held.append(store._lock.locked())  # pyright: ignore[reportPrivateUsage]
        frames = shipped(conn)
        return frames if held[-1] else frames + 10  # the first one: frames written meanwhile

    monkeypatch.setattr(sqlite_store, "checkpoint", overtaken)
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY_WRITES", 2)
    monkeypatch.setattr(sqlite_store, "WAL_CATCH_UP_FRAMES", 1)
    try:
        for _ in range(2):
            await store.create_session(title="t", metadata={})
        assert held == [False, True]
        monkeypatch.setattr(sqlite_store, "WAL_CATCH_UP_FRAMES", 10**9)  # below the bound: no second run
        for _ in range(2):
            await store.create_session(title="t", metadata={})
        assert held == [False, True, False]
    finally:
        await store.close()


async def test_a_write_on_the_loop_waits_for_a_catch_up_on_the_loop_not_in_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hops: Hops
) -> None:
    store = await SqliteStore.open(tmp_path)
    catching_up = threading.Event()
    release = threading.Event()
    shipped = sqlite_store.checkpoint

    def slow_catch_up(conn: sqlite3.Connection) -> int:
        if store._lock.locked():  # pyright: ignore[reportPrivateUsage]
            catching_up.set()
            release.wait(10)
        return shipped(conn) + sqlite_store.WAL_CATCH_UP_FRAMES

    monkeypatch.setattr(sqlite_store, "checkpoint", slow_catch_up)
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY_WRITES", 1)

    async def create() -> None:
        await store.create_session(title="t", metadata={})

    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(create)  # its checkpoint finds the WAL past the bound: a catch-up follows
                await anyio.to_thread.run_sync(catching_up.wait)
                before = hops.count
                tg.start_soon(create)
                await wait_all_tasks_blocked()
                assert hops.count == before  # waiting on the loop, not sent to a thread
                release.set()
            assert hops.count == before + 2  # then written on the loop; its own checkpoint and catch-up hop
    finally:
        release.set()
        await store.close()


def wide(count: int) -> dict[str, Any]:
    return {"items": [{"n": i} for i in range(count)]}


def test_the_size_estimate_counts_a_wide_argument_and_stops_early() -> None:
    record = running("ses_x")
    call = ToolCall(id="c1", name="t", arguments=wide(20_000))
    assert turn_fits(record, [Message(role="assistant", tool_calls=[ToolCall(id="c0", name="t")])])
    assert not turn_fits(record, [Message(role="assistant", tool_calls=[call])])
    result = ToolResult(call_id="c1", name="t", structured=wide(20_000))
    big_round = ToolRound(tool_round=1, requested_tools=[], tool_results=[result])
    assert not turn_fits(TurnRecord.model_validate({**record.model_dump(), "tool_rounds": [big_round]}), [])


async def test_writes_on_the_loop_in_a_row_set_the_busy_timeout_once_and_a_thread_still_waits(
    tmp_path: Path, statements: list[str], write_lock: sqlite3.Connection
) -> None:
    store = await SqliteStore.open(tmp_path)
    session = await store.create_session(title="t", metadata={})
    for _ in range(3):
        record = running(session.session_id)
        await store.begin_turn(record)
        assert await store.finish_turn(completed(record), exchange("q", "a"))
    pragmas = [s for s in statements if "busy_timeout" in s]
    assert pragmas == [BUSY_FAIL]  # one switch for seven writes in a row
    write_lock.execute("BEGIN IMMEDIATE")  # the next write meets another process's lock: the thread waits
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(store.begin_turn, running(session.session_id))
            await wait_all_tasks_blocked()
            write_lock.execute("COMMIT")
    assert [s for s in statements if "busy_timeout" in s][1:] == [BUSY_WAIT]
    await store.close()


async def test_a_large_history_is_read_in_a_thread_once_then_its_next_turns_begin_on_the_loop(
    tmp_path: Path, statements: list[str], hops: Hops
) -> None:
    store = await SqliteStore.open(tmp_path)
    session = await store.create_session(title="t", metadata={})
    first = running(session.session_id)
    await store.begin_turn(first)
    assert await store.finish_turn(completed(first), exchange("q", "x" * (LOOP_WRITE_MAX_CHARS + 1)))
    # The first finds out on the loop and reads in the thread; the store then holds the history parsed, so the
    # next turns read only what was added since, on the loop.
    for attempts_on_the_loop, thread_hops in ((1, 1), (1, 0), (1, 0)):
        record = running(session.session_id)
        statements.clear()
        before = hops.count
        history = await store.begin_turn(record)
        assert hops.count == before + thread_hops
        assert statements.count("BEGIN IMMEDIATE") == attempts_on_the_loop + thread_hops
        assert await store.finish_turn(completed(record), [])
        assert len(history.messages) == 2
    await store.close()


async def test_a_large_history_the_store_does_not_keep_begins_its_next_turns_in_a_thread_at_once(
    tmp_path: Path, statements: list[str], hops: Hops
) -> None:
    store = await SqliteStore.open(tmp_path)
    store._histories = HistoryCache(chars=LOOP_WRITE_MAX_CHARS)  # pyright: ignore[reportPrivateUsage]
    session = await store.create_session(title="t", metadata={})
    first = running(session.session_id)
    await store.begin_turn(first)
    assert await store.finish_turn(completed(first), exchange("q", "x" * (LOOP_WRITE_MAX_CHARS + 1)))
    for attempts_on_the_loop in (1, 0, 0):  # the first finds out, the next go straight to the thread
        record = running(session.session_id)
        statements.clear()
        before = hops.count
        history = await store.begin_turn(record)
        assert hops.count == before + 1
        assert statements.count("BEGIN IMMEDIATE") == 1 + attempts_on_the_loop
        assert await store.finish_turn(completed(record), [])
        assert len(history.messages) == 2
    await store.close()
