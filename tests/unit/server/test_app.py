"""The MCP front door's start-up: what loads when."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from agent_server import AgentRuntime, Settings
from agent_server.server.app import _prepare_after  # pyright: ignore[reportPrivateUsage]
from agent_server.testing import ScriptedLLM

pytestmark = pytest.mark.anyio


async def test_once_the_tools_are_listed_the_store_opens_without_a_call(tmp_path: Path) -> None:
    settings = Settings(workspace=tmp_path, state_dir=tmp_path / "state")
    listed = anyio.Event()
    with anyio.fail_after(10):
        async with AgentRuntime(settings, llm=ScriptedLLM([])) as runtime, anyio.create_task_group() as tg:
            tg.start_soon(_prepare_after, listed, runtime)
            await anyio.wait_all_tasks_blocked()
            assert not (tmp_path / "state" / "state.db").exists()  # nothing before the tools are listed
            listed.set()
        # the task group waited for the preparation
    assert (tmp_path / "state" / "state.db").exists()


async def test_a_store_that_cannot_open_is_left_to_the_calls_to_report(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    settings = Settings(workspace=tmp_path, state_dir=tmp_path / "file" / "state")
    listed = anyio.Event()
    listed.set()
    with anyio.fail_after(10):
        async with AgentRuntime(settings, llm=ScriptedLLM([])) as runtime:
            await _prepare_after(listed, runtime)  # does not raise
