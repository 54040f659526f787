"""Two `agent-server --transport streamable-http` processes on two ports sharing one PostgreSQL store
(`--store`): a session's turns run in order whichever replica gets them, a turn is cancelled through the
replica that does not run it, and a replica killed mid-turn leaves the turn `interrupted` as the other
sees it. The database comes from AGENT_SERVER_TEST_PG (see tests/pg)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import anyio.abc
import pytest
from mcp import Client

from tests.pg import fresh_schema
from tests.subprocess.helpers import REPO, ServerDirs, server_env, structured, wait_listening

pytestmark = pytest.mark.anyio

SLOW: dict[str, Any] = {"delay_s": 600, "content": "never sent"}


@pytest.fixture
def store_url() -> Iterator[str]:
    with fresh_schema() as url:
        yield url


@asynccontextmanager
async def replica(
    root: Path, name: str, port: int, store_url: str, script: list[dict[str, Any]]
) -> AsyncIterator[tuple[str, anyio.abc.Process]]:
    """A server process with its own workspace and state dir, on `store_url`; its MCP URL and process."""
    dirs = ServerDirs(root / name)
    dirs.workspace.mkdir(parents=True)
    argv = dirs.argv(script) + ["--store", store_url, "--transport", "streamable-http", "--port", str(port)]
    process = await anyio.open_process(argv, env=server_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with anyio.fail_after(30):
            await wait_listening("127.0.0.1", port)
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        if process.returncode is None:
            process.terminate()
        with anyio.fail_after(10):
            await process.wait()
        await process.aclose()


async def wait_for_turn(client: Client, session_id: str, turn_id: str, status: str) -> dict[str, Any]:
    """Poll `turn_get` (another process changes the turn) until it has `status`; bounded by the caller."""
    while True:
        result = await client.call_tool("turn_get", {"turn_id": turn_id, "session_id": session_id})
        if not result.is_error and result.structured_content and result.structured_content["status"] == status:
            return result.structured_content
        await anyio.sleep(0.05)


async def wait_for_running_turn(client: Client, session_id: str) -> str:
    """Poll `session_get` until the session has a running turn; its id."""
    while True:
        session = await structured(client, "session_get", {"session_id": session_id})
        running = [t["turn_id"] for t in session["turns"] if t["status"] == "running"]
        if running:
            return running[0]
        await anyio.sleep(0.05)


async def test_turns_sent_alternately_to_two_replicas_run_in_order(
    tmp_path: Path, free_tcp_port_factory: Any, store_url: str
) -> None:
    # Each turn checks that the history it starts from holds the previous turn's answer.
    a_script = [{"delay_s": 2, "content": "answer 1"}, {"expect_contains": "answer 2", "content": "answer 3"}]
    b_script = [{"expect_contains": "answer 1", "content": "answer 2"}, {"expect_contains": "answer 3", "content": "4"}]
    async with (
        replica(tmp_path, "a", free_tcp_port_factory(), store_url, a_script) as (a_url, _),
        replica(tmp_path, "b", free_tcp_port_factory(), store_url, b_script) as (b_url, _),
    ):
        with anyio.fail_after(60):
            async with Client(a_url) as a, Client(b_url) as b:
                session = (await structured(a, "session_create", {}))["session_id"]
                turn = {"session_id": session}
                async with anyio.create_task_group() as group:
                    group.start_soon(lambda: a.call_tool("run_turn", {"prompt": "one", **turn}))
                    await wait_for_running_turn(b, session)  # A's slow turn holds the session now
                    second = await structured(b, "run_turn", {"prompt": "two", **turn})  # waits for it
                third = await structured(a, "run_turn", {"prompt": "three", **turn})
                fourth = await structured(b, "run_turn", {"prompt": "four", **turn})
                got = await structured(a, "session_get", turn)
    assert [second["status"], third["status"], fourth["status"]] == ["completed"] * 3, (second, third, fourth)
    assert [(t["status"], t["final_text"]) for t in got["turns"]] == [
        ("completed", "answer 1"),
        ("completed", "answer 2"),
        ("completed", "answer 3"),
        ("completed", "4"),
    ]


async def test_a_turn_started_on_one_replica_is_cancelled_through_the_other(
    tmp_path: Path, free_tcp_port_factory: Any, store_url: str
) -> None:
    async with (
        replica(tmp_path, "a", free_tcp_port_factory(), store_url, [SLOW]) as (a_url, _),
        replica(tmp_path, "b", free_tcp_port_factory(), store_url, []) as (b_url, _),
    ):
        with anyio.fail_after(60):
            async with Client(a_url) as a, Client(b_url) as b:
                session = (await structured(a, "session_create", {}))["session_id"]
                started = await structured(a, "run_turn", {"prompt": "slow", "session_id": session, "background": True})
                turn_id = started["turn_id"]
                await wait_for_turn(b, session, turn_id, "running")
                cancelled = await b.call_tool("turn_cancel", {"turn_id": turn_id})
                seen_by_a = await structured(a, "turn_get", {"turn_id": turn_id})
    assert cancelled.structured_content is not None, cancelled.content
    assert cancelled.structured_content["status"] == "cancelled"
    assert seen_by_a["status"] == "cancelled"


async def test_a_replica_killed_mid_turn_leaves_the_turn_interrupted_as_the_other_sees_it(
    tmp_path: Path, free_tcp_port_factory: Any, store_url: str
) -> None:
    async with (
        replica(tmp_path, "a", free_tcp_port_factory(), store_url, [SLOW]) as (a_url, a_process),
        replica(tmp_path, "b", free_tcp_port_factory(), store_url, []) as (b_url, _),
    ):
        with anyio.fail_after(60):
            async with Client(b_url) as b:
                async with Client(a_url) as a:
                    session = (await structured(a, "session_create", {}))["session_id"]
                    arguments = {"prompt": "slow", "session_id": session, "background": True}
                    turn_id = (await structured(a, "run_turn", arguments))["turn_id"]
                    await wait_for_turn(b, session, turn_id, "running")
                    a_process.kill()
                    await a_process.wait()
                record = await wait_for_turn(b, session, turn_id, "interrupted")
    assert record["error"]["type"] == "interrupted"


@cache
def mcp_tasks() -> ModuleType:
    """The reference client helper for MCP tasks on 2026-07-28 (`clients/python/mcp_tasks.py`)."""
    spec = importlib.util.spec_from_file_location("mcp_tasks", REPO / "clients" / "python" / "mcp_tasks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the models' annotations through it
    spec.loader.exec_module(module)
    return module


async def test_a_task_created_on_one_replica_is_found_and_cancelled_through_the_other(
    tmp_path: Path, free_tcp_port_factory: Any, store_url: str
) -> None:
    """2026-07-28 over HTTP: a request has no connection, so the task id alone finds the task, on any replica."""
    created = anyio.Event()
    task_ids: list[str] = []

    def on_task(task_id: str) -> None:
        task_ids.append(task_id)
        created.set()

    results: list[Any] = []
    async with (
        replica(tmp_path, "a", free_tcp_port_factory(), store_url, [SLOW]) as (a_url, _),
        replica(tmp_path, "b", free_tcp_port_factory(), store_url, []) as (b_url, _),
    ):
        with anyio.fail_after(60):
            tasks = mcp_tasks()
            async with Client(a_url, extensions=[tasks.TasksExtension(on_task=on_task)]) as a, Client(b_url) as b:
                async with anyio.create_task_group() as group:

                    async def call() -> None:
                        results.append(await a.call_tool("run_turn", {"prompt": "slow", "session_id": "new"}))

                    group.start_soon(call)
                    await created.wait()
                    working = await tasks.get_task(b.session, task_ids[0])
                    await tasks.cancel(b.session, task_ids[0])
                after = await tasks.get_task(b.session, task_ids[0])
    assert working.status == "working"
    assert after.status == "cancelled"
    (result,) = results
    assert result.is_error is True
