"""MCP tasks on 2026-07-28 (SEP-2663): run_turn as a task for clients that declare the extension, through
the reference client helper `clients/python/mcp_tasks.py`."""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError

from agent_server.llm.scripted import ScriptedLLM
from agent_server.server.app import create_server
from tests.interaction.harness import make_settings

pytestmark = pytest.mark.anyio

HELPER = Path(__file__).resolve().parents[2] / "clients" / "python" / "mcp_tasks.py"
VOLATILE = {"turn_id", "session_id", "trace_id", "started_at", "finished_at"}


@cache
def mcp_tasks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mcp_tasks", HELPER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the models' annotations through it
    spec.loader.exec_module(module)
    return module


def _stable(result: types.CallToolResult) -> tuple[Any, ...]:
    record = {k: v for k, v in (result.structured_content or {}).items() if k not in VOLATILE}
    for model_call in record.get("assistant_turns", []):
        model_call.pop("duration_s", None)  # how long each model call took: volatile too
    return result.is_error, [c.model_dump() for c in result.content], record


async def test_a_declaring_client_gets_a_task_that_ends_with_the_synchronous_result(tmp_path: Path) -> None:
    script = [{"content": "The same answer."}, {"content": "The same answer."}]
    server = create_server(make_settings(tmp_path), llm=ScriptedLLM(script))
    task_ids: list[str] = []
    arguments = {"prompt": "answer", "session_id": "new", "detail": "full"}
    with anyio.fail_after(20):
        async with Client(server, extensions=[mcp_tasks().TasksExtension(on_task=task_ids.append)]) as client:
            assert client.server_capabilities is not None and client.server_capabilities.extensions is not None
            assert "io.modelcontextprotocol/tasks" in client.server_capabilities.extensions
            as_task = await client.call_tool("run_turn", arguments)
            polled = await mcp_tasks().get_task(client.session, task_ids[0])
        async with Client(server) as plain:
            synchronous = await plain.call_tool("run_turn", arguments)
    assert len(task_ids) == 1  # the server answered with a task, and the helper polled it
    assert polled.status == "completed" and polled.result is not None
    assert types.CallToolResult.model_validate(polled.result) == as_task
    assert as_task.structured_content is not None and as_task.structured_content["status"] == "completed"
    assert _stable(as_task) == _stable(synchronous)


async def test_tasks_cancel_ends_the_task_cancelled(tmp_path: Path) -> None:
    server = create_server(make_settings(tmp_path), llm=ScriptedLLM([{"delay_s": 60, "content": "never"}]))
    created = anyio.Event()
    task_ids: list[str] = []

    def on_task(task_id: str) -> None:
        task_ids.append(task_id)
        created.set()

    results: list[types.CallToolResult] = []
    with anyio.fail_after(20):
        async with Client(server, extensions=[mcp_tasks().TasksExtension(on_task=on_task)]) as client:
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    results.append(await client.call_tool("run_turn", {"prompt": "slow"}))

                tg.start_soon(call)
                await created.wait()
                working = await mcp_tasks().get_task(client.session, task_ids[0])
                await mcp_tasks().cancel(client.session, task_ids[0])
            after = await mcp_tasks().get_task(client.session, task_ids[0])
    assert working.status == "working" and working.status_message
    (result,) = results
    assert result.is_error is True and result.content[0].text.startswith("[task cancelled]")  # type: ignore[union-attr]
    assert after.status == "cancelled" and after.result is None


async def test_unknown_tasks_are_invalid_params_and_updates_are_acknowledged(tmp_path: Path) -> None:
    server = create_server(make_settings(tmp_path), llm=ScriptedLLM([]))
    with anyio.fail_after(10):
        async with Client(server, extensions=[mcp_tasks().TasksExtension()]) as client:
            with pytest.raises(MCPError) as unknown:
                await mcp_tasks().get_task(client.session, "no-such-task")
            await mcp_tasks().cancel(client.session, "no-such-task")  # acknowledged, as the SEP requires
    assert unknown.value.code == types.INVALID_PARAMS


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_client_without_the_extension_gets_a_normal_result(tmp_path: Path, mode: str) -> None:
    server = create_server(make_settings(tmp_path), llm=ScriptedLLM([{"content": "plain"}]))
    with anyio.fail_after(10):
        async with Client(server, mode=mode) as client:
            result = await client.call_tool("run_turn", {"prompt": "x"})
    assert result.structured_content is not None and result.structured_content["final_text"] == "plain"


async def test_cancelling_the_caller_cancels_its_task(tmp_path: Path) -> None:
    server = create_server(make_settings(tmp_path), llm=ScriptedLLM([{"delay_s": 60, "content": "never"}]))
    task_ids: list[str] = []
    the_call = anyio.CancelScope()

    def on_task(task_id: str) -> None:
        task_ids.append(task_id)
        the_call.cancel()  # the caller gives up as soon as the task exists

    with anyio.fail_after(20):
        async with Client(server, extensions=[mcp_tasks().TasksExtension(on_task=on_task)]) as client:
            with the_call:
                await client.call_tool("run_turn", {"prompt": "slow"})
            after = await mcp_tasks().get_task(client.session, task_ids[0])
    assert the_call.cancelled_caught
    assert after.status == "cancelled"  # the helper sent tasks/cancel before re-raising
