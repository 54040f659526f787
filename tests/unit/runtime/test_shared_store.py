"""Two runtimes on one PostgreSQL store stand for two replicas: a session's turns run one at a time across
them, and a turn running in one is cancelled through the other (tests/pg says where the database comes from)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from anyio import wait_all_tasks_blocked
from anyio.abc import TaskGroup

from agent_server import AgentRuntime, Settings, TurnHandle
from agent_server.errors import InvalidArgument
from agent_server.events import AgentEvent
from agent_server.store import _pg_db
from agent_server.store.postgres import PostgresStore
from agent_server.testing import ScriptedLLM
from agent_server.turn_options import TurnOptions
from agent_server.types import Message, TurnRecord
from tests.pg import fresh_schema

pytestmark = pytest.mark.anyio

SLOW: dict[str, Any] = {"delay_s": 600, "content": "never sent"}
"""A model call that lasts until it is cancelled."""


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_schema() as schema_url:
        yield schema_url


@asynccontextmanager
async def replica(tmp_path: Path, url: str, name: str, *script: dict[str, Any]) -> AsyncIterator[AgentRuntime]:
    (tmp_path / name).mkdir()
    settings = Settings(workspace=tmp_path / name, store_url=url)
    async with AgentRuntime(settings, llm=ScriptedLLM(list(script))) as runtime:
        await runtime.prepare()
        yield runtime


class Started:
    """An event sink that tells when the turn has begun (its record is stored as `running`)."""

    def __init__(self) -> None:
        self.begun = anyio.Event()
        self.turn_id = ""

    async def __call__(self, event: AgentEvent) -> None:
        if event.type == "turn":
            self.turn_id = event.turn_id
            self.begun.set()


async def begun_slow_turn(runtime: AgentRuntime, group: TaskGroup) -> TurnHandle:
    """A background turn of the `SLOW` model in a new session, followed in `group`, once it has begun."""
    session = await runtime.create_session(title="s")
    handle = await runtime.start_turn("slow", session_id=session.session_id)
    started = Started()
    group.start_soon(lambda: handle.follow(started, timeout_s=600))
    await started.begun.wait()
    return handle


async def test_a_background_turn_on_one_replica_is_cancelled_through_the_other(tmp_path: Path, url: str) -> None:
    async with replica(tmp_path, url, "a", SLOW) as a, replica(tmp_path, url, "b") as b:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                handle = await begun_slow_turn(a, group)
                record = await b.cancel_turn(handle.turn_id)
                seen_by_a = await a.find_turn(handle.turn_id)  # stored, so A says so too: no await before this
                group.cancel_scope.cancel()
            assert record.status == "cancelled"
            assert seen_by_a.status == "cancelled"
            assert (await handle.wait(10)).status == "cancelled"
        assert (await b.find_turn(handle.turn_id)).status == "cancelled"  # found from B without its session


async def test_the_replica_running_a_turn_shows_its_stored_end_before_its_task_resumes(
    tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A's task hears of its commit a moment after B may have read the record: that moment, held open here.
    committed, resume = anyio.Event(), anyio.Event()
    finish_turn = PostgresStore.finish_turn

    async def slow_to_hear(store: PostgresStore, record: TurnRecord, messages: list[Message]) -> bool:
        written = await finish_turn(store, record, messages)
        if record.status == "cancelled":
            committed.set()
            await resume.wait()
        return written

    monkeypatch.setattr(PostgresStore, "finish_turn", slow_to_hear)
    async with replica(tmp_path, url, "a", SLOW) as a, replica(tmp_path, url, "b") as b:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                handle = await begun_slow_turn(a, group)
                assert (await b.cancel_turn(handle.turn_id)).status == "cancelled"
                await committed.wait()
                try:
                    assert not handle.done
                    assert (await a.find_turn(handle.turn_id)).status == "cancelled"
                finally:
                    resume.set()
            assert (await handle.wait(10)).status == "cancelled"


async def test_a_run_turn_call_on_one_replica_is_cancelled_through_the_other(tmp_path: Path, url: str) -> None:
    async with replica(tmp_path, url, "a", SLOW) as a, replica(tmp_path, url, "b") as b:
        session = await a.create_session(title="s")
        started = Started()
        ended: list[TurnRecord] = []

        async def run() -> None:
            ended.append(await a.run_turn("slow", session_id=session.session_id, on_event=started))

        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(run)
                await started.begun.wait()
                cancelled = await b.cancel_turn(started.turn_id)
        assert cancelled.status == "cancelled"
        assert [r.status for r in ended] == ["cancelled"]


async def test_a_turn_waits_for_the_sessions_turn_on_the_other_replica(tmp_path: Path, url: str) -> None:
    answer = {"content": "second"}
    async with replica(tmp_path, url, "a", SLOW) as a, replica(tmp_path, url, "b", answer, answer) as b:
        session = await a.create_session(title="s")
        started = Started()
        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: a.run_turn("first", session_id=session.session_id, on_event=started))
                await started.begun.wait()
                # While A's turn holds the session, B's waits: its deadline passes before it may begin.
                waited = await b.run_turn("second", session_id=session.session_id, options=TurnOptions(timeout_s=0.3))
                assert waited.status == "timed_out"
                await b.cancel_turn(started.turn_id)
            after = await b.run_turn("second", session_id=session.session_id)
        assert after.status == "completed"
        turns, _ = await b.list_turns(session.session_id)
        assert [(t.prompt, t.status) for t in turns] == [
            ("first", "cancelled"),
            ("second", "timed_out"),
            ("second", "completed"),
        ]


async def test_waiting_on_the_other_replica_returns_once_the_turn_ended(tmp_path: Path, url: str) -> None:
    async with replica(tmp_path, url, "a", SLOW) as a, replica(tmp_path, url, "b") as b:
        session = await a.create_session(title="s")
        handle = await a.start_turn("slow", session_id=session.session_id)
        started = Started()
        waited: list[TurnRecord] = []

        async def wait_on_b() -> None:
            waited.append(await b.wait_stored_turn(handle.turn_id, None, timeout_s=30))

        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: handle.follow(started, timeout_s=600))
                await started.begun.wait()
                assert (await b.wait_stored_turn(handle.turn_id, None, timeout_s=0.01)).status == "running"
                group.start_soon(wait_on_b)
                await wait_all_tasks_blocked()
                assert not waited  # B waits for the turn that runs on A
                handle.cancel()
        assert [r.status for r in waited] == ["cancelled"]


async def _kill_turn_lock(url: str, session_id: str) -> None:
    """End, on the server, the connection holding the session's turn lock (as a network failure would)."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2"
            " AND granted AND classid = %s AND objid = (hashtext(%s))::oid",
            (_pg_db.LOCK_SPACE, session_id),
        )
        assert await cursor.fetchall() == [(True,)]


async def test_a_replica_that_loses_its_turn_lock_stops_its_turn_before_the_other_begins(
    tmp_path: Path, url: str
) -> None:
    answer = {"content": "B's answer"}
    async with replica(tmp_path, url, "a", SLOW) as a, replica(tmp_path, url, "b", answer) as b:
        session = (await a.create_session(title="s")).session_id
        started = Started()
        ended: list[TurnRecord] = []
        seen_when_b_began: list[TurnRecord] = []

        async def on_b_event(event: AgentEvent) -> None:
            if event.type == "turn":  # B's turn has begun: A's must be over, and stored so
                seen_when_b_began.append(await b.find_turn(started.turn_id))

        async def run_a() -> None:
            ended.append(await a.run_turn("A's prompt", session_id=session, on_event=started))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                group.start_soon(run_a)
                await started.begun.wait()
                group.start_soon(lambda: b.run_turn("B's prompt", session_id=session, on_event=on_b_event))
                await wait_all_tasks_blocked()  # B waits for the session's turn lock
                await _kill_turn_lock(url, session)
        turns, _ = await b.list_turns(session)
        history = await b.history(session)

    (stopped,) = ended
    assert stopped.status == "failed" and stopped.error is not None and stopped.error.type == "store_error"
    assert "lost the connection holding session" in stopped.error.message and "turn lock" in stopped.error.message
    assert [t.status for t in seen_when_b_began] == ["failed"]  # A stopped and stored before B began
    assert [(t.prompt, t.status) for t in turns] == [("A's prompt", "failed"), ("B's prompt", "completed")]
    assert turns[0].finished_at is not None and turns[0].finished_at <= turns[1].started_at
    assert [m.message.text() for m in history.messages] == ["B's prompt", "B's answer"]  # nothing of A's


async def test_a_malformed_task_id_is_an_invalid_argument_before_the_store(tmp_path: Path, url: str) -> None:
    async with replica(tmp_path, url, "a") as a:
        for bad in ["task\x00id", "t" * 129, "task id"]:
            with pytest.raises(InvalidArgument, match="malformed task_id"):
                await a.shared_task(bad)
        assert await a.shared_task("T" * 128) is None  # well-formed and unknown
