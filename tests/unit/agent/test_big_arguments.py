"""A model's large tool-call arguments are checked and fitted in a worker thread, not on the event loop."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from agent_server import AgentRuntime, Settings, TurnOptions
from agent_server.agent import loop
from agent_server.agent.arguments import LOOP_ARGUMENTS_MAX_CHARS, calls_fit
from agent_server.testing import ScriptedLLM
from agent_server.types import ToolCall

pytestmark = pytest.mark.anyio


def wide(items: int) -> dict[str, Any]:
    """Arguments of many small values (a 1 MB crafted argument is like this, only wider)."""
    return {"path": ".", "extra": [{"k": [i, str(i)]} for i in range(items)]}


async def turn_with(tmp_path: Path, arguments: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Run a turn whose model sends `arguments` to `list_dir`; the names of what ran in worker threads."""
    ran: list[str] = []
    shipped = anyio.to_thread.run_sync

    async def recorded(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        ran.append(getattr(fn, "__name__", repr(fn)))
        return await shipped(fn, *args, **kwargs)

    monkeypatch.setattr(loop.anyio.to_thread, "run_sync", recorded)
    (tmp_path / "ws").mkdir()
    llm = ScriptedLLM([{"tool_calls": [{"name": "list_dir", "arguments": arguments}]}, {"content": "done"}])
    settings = Settings(workspace=tmp_path / "ws", state_dir=tmp_path / "state")
    with anyio.fail_after(30):
        async with AgentRuntime(settings, llm=llm) as runtime:
            record = await runtime.run_turn("go", session_id="new", options=TurnOptions(max_tool_passes=1))
    assert record.status == "completed"
    assert len(record.tool_rounds) == 1
    return ran


async def test_large_arguments_are_bounded_and_fitted_in_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "_bound_and_fit" in await turn_with(tmp_path, wide(50_000), monkeypatch)


async def test_small_arguments_are_checked_on_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "_bound_and_fit" not in await turn_with(tmp_path, {"path": "."}, monkeypatch)


def test_the_size_check_stops_early_on_wide_and_long_arguments() -> None:
    assert calls_fit([ToolCall(id="c", name="t", arguments={"path": "."})], LOOP_ARGUMENTS_MAX_CHARS)
    assert not calls_fit([ToolCall(id="c", name="t", arguments=wide(50_000))], LOOP_ARGUMENTS_MAX_CHARS)
    long_text = {"content": "x" * (LOOP_ARGUMENTS_MAX_CHARS + 1)}
    assert not calls_fit([ToolCall(id="c", name="t", arguments=long_text)], LOOP_ARGUMENTS_MAX_CHARS)
