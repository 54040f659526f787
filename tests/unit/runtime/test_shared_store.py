"""Two runtimes on one PostgreSQL store stand for two replicas: a session's turns run one at a time across
them, and a turn running in one is cancelled through the other (tests/pg says where the database comes from)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked

from agent_server import AgentRuntime, Settings
from agent_server.events import AgentEvent
from agent_server.testing import ScriptedLLM
from agent_server.types import TurnRecord
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


async def test_a_background_turn_on_one_replica_is_cancelled_through_the_other(tmp_path: Path, url: str) -> None:
    async with replica(tmp_path, url, "a", SLOW) as a, replica(tmp_path, url, "b") as b:
        session = await a.create_session(title="s")
        handle = await a.start_turn("slow", session_id=session.session_id)
        started = Started()
        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: handle.follow(started, timeout_s=600))
                await started.begun.wait()
                record = await b.cancel_turn(handle.turn_id)
                group.cancel_scope.cancel()
            assert record.status == "cancelled"
            assert (await handle.wait(10)).status == "cancelled"
        assert (await b.find_turn(handle.turn_id)).status == "cancelled"  # found from B without its session


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
                waited = await b.run_turn("second", session_id=session.session_id, timeout_s=0.3)
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
