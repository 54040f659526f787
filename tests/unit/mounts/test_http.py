"""A Streamable HTTP mount against an SDK server under uvicorn in this process: headers with `${VAR}`,
progress, an unreachable URL, and a server that goes away and comes back."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import anyio
import anyio.abc
import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer

from agent_server.mounts.config import MountConfig, parse_mcp_servers
from agent_server.types import ToolCall
from tests.fakes import mcp_echo
from tests.unit.mounts.helpers import Progress, mounted, poll_until

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def http_server(port: int) -> AsyncGenerator[str]:
    app = mcp_echo.build("fake-echo-http").streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        await poll_until(lambda: server.started, timeout=10)  # uvicorn has no event for it
        yield f"http://127.0.0.1:{port}/mcp"
        server.should_exit = server.force_exit = True


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_http_mount_sends_headers_and_relays_progress(mode: str, free_tcp_port: int) -> None:
    async with http_server(free_tcp_port) as url:
        doc = {"servers": {"web": {"type": "http", "url": url, "headers": {"Authorization": "Bearer ${TOKEN}"}}}}
        configs = parse_mcp_servers(doc, environ={"TOKEN": "s3cret"})
        async with mounted(configs, mode=mode) as manager:
            (state,) = manager.states()
            assert (state["transport"], state["state"]) == ("http", "ready")
            header = await manager.call_tool(ToolCall(id="c1", name="web__header", arguments={"name": "authorization"}))
            assert header.text() == "Bearer s3cret"
            progress = Progress()
            slow = await manager.call_tool(
                ToolCall(id="c2", name="web__slow", arguments={"steps": 2, "delay": 0.12}), on_progress=progress
            )
            assert slow.text() == "done 2 steps"
            assert progress.updates == [(1, 2, "step 1/2"), (2, 2, "step 2/2")]


async def test_an_unreachable_url_fails_with_the_reason(free_tcp_port: int) -> None:
    config = MountConfig(name="gone", url=f"http://127.0.0.1:{free_tcp_port}/mcp", startup_timeout_s=5)
    async with mounted([config]) as manager:
        (state,) = manager.states()
        assert state["state"] == "failed"
        assert "ConnectError" in state["error"] and str(free_tcp_port) in state["error"]


async def serve(port: int, stop: anyio.Event, stopped: anyio.Event, *, task_status: anyio.abc.TaskStatus[None]) -> None:
    try:
        async with http_server(port):
            task_status.started()
            await stop.wait()
    finally:
        stopped.set()


async def test_a_server_that_went_away_is_reconnected_by_the_next_call(free_tcp_port: int) -> None:
    config = MountConfig(name="web", url=f"http://127.0.0.1:{free_tcp_port}/mcp", timeout_s=10)
    async with anyio.create_task_group() as servers:
        first, first_stopped = anyio.Event(), anyio.Event()
        await servers.start(serve, free_tcp_port, first, first_stopped)
        async with mounted([config]) as manager:
            assert (
                await manager.call_tool(ToolCall(id="c1", name="web__echo", arguments={"text": "one"}))
            ).text() == "one"
            first.set()
            with anyio.fail_after(10):
                await first_stopped.wait()
                state = manager.connections["web"]
                while state.state == "ready":  # the transport notices the server's end by itself...
                    down = await manager.call_tool(
                        ToolCall(id="c2", name="web__echo", arguments={"text": "two"})
                    )  # ...or a call does
                    assert down.is_error
            assert manager.states()[0]["state"] == "failed"
            second = anyio.Event()
            await servers.start(serve, free_tcp_port, second, anyio.Event())
            back = await manager.call_tool(ToolCall(id="c3", name="web__echo", arguments={"text": "three"}))
            assert (back.is_error, back.text()) == (False, "three")
            assert manager.states()[0]["state"] == "ready"
            second.set()


def gate_server(calls: int) -> MCPServer:
    """One tool, `gate`, whose calls all wait until `calls` of them are in flight at once."""
    server = MCPServer("gate", log_level="WARNING")
    state = {"in": 0}
    full = anyio.Event()

    @server.tool()
    async def gate() -> str:
        state["in"] += 1
        if state["in"] >= calls:
            full.set()
        await full.wait()
        return "through"

    return server


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_more_than_a_hundred_calls_to_one_http_mount_are_in_flight_at_once(mode: str, free_tcp_port: int) -> None:
    calls = 120  # httpx2's default pool would hold the 101st back until its pool timeout
    app = gate_server(calls).streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_tcp_port, log_level="warning"))
    config = MountConfig(name="web", url=f"http://127.0.0.1:{free_tcp_port}/mcp", timeout_s=60)
    texts: list[str] = []

    async def one(i: int) -> None:
        texts.append((await manager.call_tool(ToolCall(id=f"c{i}", name="web__gate", arguments={}))).text())

    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        await poll_until(lambda: server.started, timeout=10)
        async with mounted([config], mode=mode) as manager:
            with anyio.fail_after(20):
                async with anyio.create_task_group() as callers:
                    for i in range(calls):
                        callers.start_soon(one, i)
        server.should_exit = server.force_exit = True
    assert texts == ["through"] * calls
