"""A session's turns and its history tell one order, the order the turns ran, on every store: within one
process (a background turn stored `running` before it queued), and across two processes sharing a store (two
runtimes on one SQLite state dir, or on one PostgreSQL database, stand for two server processes)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_server import AgentRuntime, Settings
from agent_server.llm.base import ModelRequest, ModelResponse, RetryCallback, TextCallback
from agent_server.runtime import TurnHandle
from agent_server.runtime.progress import QUEUED
from agent_server.testing import ScriptedLLM
from tests.pg import fresh_schema

pytestmark = pytest.mark.anyio


class GatedLLM:
    """Answers each prompt with `answer: <prompt>`, the first call only once the test opens the gate; keeps
    every request (what each turn's model was shown)."""

    name = "gated"

    def __init__(self) -> None:
        self.called = anyio.Event()
        self.gate = anyio.Event()
        self.requests: list[ModelRequest] = []

    async def complete(
        self, request: ModelRequest, *, on_text: TextCallback | None = None, on_retry: RetryCallback | None = None
    ) -> ModelResponse:
        self.requests.append(request)
        self.called.set()
        await self.gate.wait()
        prompt = request.messages[-1].content
        return await ScriptedLLM([{"content": f"answer: {prompt}"}]).complete(request)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Where the runtimes of a test keep their sessions: one state dir, or one PostgreSQL schema."""
    if request.param == "sqlite":
        yield {"state_dir": tmp_path / "state"}
        return
    with fresh_schema() as url:
        yield {"store_url": url}


@asynccontextmanager
async def server(tmp_path: Path, name: str, store: dict[str, Any], llm: Any) -> AsyncIterator[AgentRuntime]:
    """One runtime (a server process) with its own workspace on the shared store."""
    (tmp_path / name).mkdir()
    async with AgentRuntime(Settings(workspace=tmp_path / name, **store), llm=llm) as runtime:
        await runtime.prepare()
        yield runtime


async def stage_is(handle: TurnHandle, stage: str) -> None:
    """Until the background turn's stage is `stage` or it ended (bounded by the caller)."""
    while handle.stage != stage and not handle.done:
        await handle.next_change().wait()


async def prompts_in_order(runtime: AgentRuntime, session_id: str) -> tuple[list[str], list[str]]:
    """The session's turns (their prompts) and its history's user messages, each in stored order."""
    turns, _ = await runtime.list_turns(session_id)
    history = await runtime.history(session_id)
    users = [m.message.content for m in history.messages if m.message.role == "user"]
    return [t.prompt for t in turns], users


async def test_a_background_turn_queued_behind_a_waiting_call_is_listed_where_it_ran(
    tmp_path: Path, store: dict[str, Any]
) -> None:
    llm = GatedLLM()
    async with server(tmp_path, "one", store, llm) as runtime:
        session = (await runtime.create_session(title="s")).session_id
        queued = anyio.Event()
        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: runtime.run_turn("first", session_id=session))
                await llm.called.wait()  # "first" holds the session
                group.start_soon(
                    lambda: runtime.run_turn("second", session_id=session, on_wait=lambda _what: queued.set())
                )
                await queued.wait()  # "second" waits for the session (it has no record yet)
                third = await runtime.start_turn("third", session_id=session)  # stored now, queued after "second"
                await stage_is(third, QUEUED)
                llm.gate.set()
            assert (await third.wait(20)).status == "completed"
        turns, users = await prompts_in_order(runtime, session)
    assert users == ["first", "second", "third"]  # the order the turns ran
    assert turns == users


async def test_a_turn_on_another_process_waits_for_the_sessions_running_turn(
    tmp_path: Path, store: dict[str, Any]
) -> None:
    gated, quick = GatedLLM(), GatedLLM()
    quick.gate.set()
    async with server(tmp_path, "a", store, gated) as a, server(tmp_path, "b", store, quick) as b:
        session = (await a.create_session(title="s")).session_id
        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: a.run_turn("first", session_id=session))
                await gated.called.wait()  # A's turn holds the session
                second = await b.start_turn("second", session_id=session)
                await stage_is(second, QUEUED)  # B's turn queues behind A's instead of running beside it
                assert not quick.requests  # it has not reached its model
                gated.gate.set()
            assert (await second.wait(20)).status == "completed"
        turns, users = await prompts_in_order(b, session)
    assert users == ["first", "second"] and turns == users
    shown = [m.content for m in quick.requests[0].messages if m.role in ("user", "assistant")]
    assert shown == ["first", "answer: first", "second"]  # B's turn began from A's whole turn
