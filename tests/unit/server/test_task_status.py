"""An MCP task's status message says what its turn does now: starting, waiting for an earlier turn of its
session, then its latest step, each with its progress so far (never "queued" when nothing is queued)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from agent_server import AgentRuntime, Settings
from agent_server.runtime import TurnHandle
from agent_server.runtime.progress import QUEUED
from agent_server.server.tasks.registry import TaskRegistry, task_state
from agent_server.testing import ScriptedLLM

pytestmark = pytest.mark.anyio

SLOW = {"delay_s": 600, "content": "never"}


async def _until(handle: TurnHandle, done: bool = False, stage: str | None = None) -> None:
    while not (handle.done if done else handle.stage == stage):
        await handle.next_change().wait()


async def test_a_tasks_status_says_starting_then_queued_then_its_latest_step(tmp_path: Path) -> None:
    settings = Settings(workspace=tmp_path, state_dir=tmp_path / "state")
    registry = TaskRegistry()
    async with AgentRuntime(settings, llm=ScriptedLLM([SLOW, {"content": "second"}])) as runtime:
        session = (await runtime.create_session(title="s")).session_id
        with anyio.fail_after(20):
            first = await runtime.start_turn("slow", session_id=session)
            fresh = registry.add(runtime, ("local", None), first.record, "summary")
            starting = await task_state(runtime, fresh)
            await _until(first, stage=None)  # it began: the session is held
            second = await runtime.start_turn("next", session_id=session)
            entry = registry.add(runtime, ("local", None), second.record, "summary")
            await _until(second, stage=QUEUED)
            queued = await task_state(runtime, entry)
            running = await task_state(runtime, fresh)
            await runtime.cancel_turn(first.turn_id)
            await _until(second, done=True)
    assert starting.status == "working" and starting.message.startswith("starting (0 model calls, 0 tool calls, ")
    assert queued.message.startswith(f"{QUEUED} (0 model calls, ")
    assert not running.message.startswith(("starting", QUEUED)) and "0 model calls" in running.message
