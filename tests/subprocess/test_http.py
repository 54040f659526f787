"""`agent-server --transport streamable-http`: the same tools over HTTP, loopback-bound and rebinding-protected."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from tests.subprocess.helpers import MODES, ServerDirs, server_env, wait_listening

pytestmark = pytest.mark.anyio

SCRIPT = [
    {"tool_calls": [{"name": "list_dir", "arguments": {}}]},
    {"expect_contains": "hello.txt", "content": "There is hello.txt."},
]


@asynccontextmanager
async def http_server(
    dirs: ServerDirs, port: int, host: str = "127.0.0.1", script: list[dict[str, Any]] = SCRIPT
) -> AsyncIterator[str]:
    argv = dirs.argv(script) + ["--transport", "streamable-http", "--host", host, "--port", str(port)]
    process = await anyio.open_process(argv, env=server_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://{host}:{port}/mcp"
    try:
        with anyio.fail_after(20):
            await wait_listening(host, port)
        yield url
    finally:
        process.terminate()
        with anyio.fail_after(10):
            await process.wait()
        await process.aclose()


@pytest.mark.parametrize("mode", MODES)
async def test_run_turn_over_streamable_http(dirs: ServerDirs, free_tcp_port: int, mode: str) -> None:
    (dirs.workspace / "hello.txt").write_text("hi")
    updates: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append(message or "")

    async with http_server(dirs, free_tcp_port) as url:
        with anyio.fail_after(20):
            async with Client(url, mode=mode) as client:
                tools = await client.list_tools()
                result = await client.call_tool("run_turn", {"prompt": "what is here?"}, progress_callback=on_progress)
    assert len(tools.tools) == 12
    assert result.structured_content["status"] == "completed", result.structured_content
    assert result.structured_content["final_text"] == "There is hello.txt."
    assert updates and updates[-1] == "done: completed"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2"])
async def test_dns_rebinding_protection_rejects_foreign_hosts(dirs: ServerDirs, free_tcp_port: int, host: str) -> None:
    """Every loopback address is protected, not only the spellings the SDK knows (127.0.0.2 was not)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    accept = {"Accept": "application/json, text/event-stream"}
    async with http_server(dirs, free_tcp_port, host) as url, httpx.AsyncClient() as http:
        with anyio.fail_after(10):
            foreign = await http.post(url, json=body, headers={**accept, "Host": "evil.example:80"})
            origin = await http.post(url, json=body, headers={**accept, "Origin": "http://evil.example"})
            own = await http.post(url, json=body, headers=accept)
    assert (foreign.status_code, origin.status_code) == (421, 403)
    assert own.status_code != 421, own.text


SLOW_THEN_QUICK = [{"delay_s": 3, "content": "slow answer"}, {"content": "queued answer"}]
LEGACY_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


async def legacy_session(http: httpx.AsyncClient, url: str) -> dict[str, str]:
    """Initialize a handshake-era MCP session by hand; the headers its later requests carry."""
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }
    response = await http.post(url, json=hello, headers=LEGACY_HEADERS)
    headers = {**LEGACY_HEADERS, "Mcp-Session-Id": response.headers["mcp-session-id"]}
    await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


async def drop_after_first_progress(http: httpx.AsyncClient, url: str, headers: dict[str, str], session: str) -> None:
    """POST run_turn, read its stream until the turn is sampling, then close the connection."""
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {
            "name": "run_turn",
            "arguments": {"prompt": "slow", "session_id": session},
            "_meta": {"progressToken": 7},
        },
    }
    async with http.stream("POST", url, json=call, headers=headers) as response:
        async for line in response.aiter_lines():
            if "notifications/progress" in line and "sampling" in line:
                return


async def test_a_dropped_post_stream_does_not_cancel_the_turn(dirs: ServerDirs, free_tcp_port: int) -> None:
    """Handshake era: a disconnect is not a cancellation (the spec); the turn runs on and is recorded."""
    async with http_server(dirs, free_tcp_port, script=SLOW_THEN_QUICK) as url, httpx.AsyncClient() as http:
        with anyio.fail_after(30):
            async with Client(url, mode="legacy") as client:
                session = (await client.call_tool("session_create", {})).structured_content["session_id"]
                await drop_after_first_progress(http, url, await legacy_session(http, url), session)
                # Turns on one session queue in order: this returns once the dropped one has ended.
                queued = await client.call_tool("run_turn", {"prompt": "next", "session_id": session})
                got = await client.call_tool("session_get", {"session_id": session})
    assert queued.structured_content["final_text"] == "queued answer"
    turns = got.structured_content["turns"]
    assert [(t["status"], t["final_text"]) for t in turns] == [
        ("completed", "slow answer"),
        ("completed", "queued answer"),
    ]


async def test_closing_the_stream_cancels_the_turn_on_2026_07_28(dirs: ServerDirs, free_tcp_port: int) -> None:
    """On 2026-07-28 a request is its own HTTP exchange: closing its stream is how a client cancels."""
    started = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if (message or "").startswith("sampling"):  # the model call (and its script entry) has begun
            started.set()

    async with http_server(dirs, free_tcp_port, script=SLOW_THEN_QUICK) as url:
        with anyio.fail_after(30):
            async with Client(url, mode="auto") as client:
                session = (await client.call_tool("session_create", {})).structured_content["session_id"]
                async with anyio.create_task_group() as tg:

                    async def slow() -> None:
                        arguments = {"prompt": "slow", "session_id": session}
                        await client.call_tool("run_turn", arguments, progress_callback=on_progress)

                    tg.start_soon(slow)
                    await started.wait()
                    tg.cancel_scope.cancel()
                queued = await client.call_tool("run_turn", {"prompt": "next", "session_id": session})
                got = await client.call_tool("session_get", {"session_id": session})
    assert queued.structured_content["final_text"] == "queued answer"
    assert [t["status"] for t in got.structured_content["turns"]] == ["cancelled", "completed"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_background_turn_outlives_its_http_request(dirs: ServerDirs, free_tcp_port: int, mode: str) -> None:
    script = [{"delay_s": 0.5, "content": "Done in the background."}]
    async with http_server(dirs, free_tcp_port, script=script) as url:
        with anyio.fail_after(30):
            async with Client(url, mode=mode) as client:
                started = await client.call_tool("run_turn", {"prompt": "slow", "background": True})
                turn_id = started.structured_content["turn_id"]  # type: ignore[index]
            async with Client(url, mode=mode) as client:  # another connection: any caller with the id may wait
                ended = await client.call_tool("turn_wait", {"turn_id": turn_id, "timeout_s": 20})
    assert started.structured_content is not None and started.structured_content["status"] == "running"
    assert ended.structured_content is not None and ended.structured_content["status"] == "completed"
    assert ended.structured_content["final_text"] == "Done in the background."
