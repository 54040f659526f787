"""`agent-server --transport streamable-http`: the same tools over HTTP, loopback-bound and rebinding-protected."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx
import pytest
from mcp import Client

from tests.subprocess.helpers import MODES, ServerDirs, server_env

pytestmark = pytest.mark.anyio

SCRIPT = [
    {"tool_calls": [{"name": "list_dir", "arguments": {}}]},
    {"expect_contains": "hello.txt", "content": "There is hello.txt."},
]


@asynccontextmanager
async def http_server(dirs: ServerDirs, port: int, host: str = "127.0.0.1") -> AsyncIterator[str]:
    argv = dirs.argv(SCRIPT) + ["--transport", "streamable-http", "--host", host, "--port", str(port)]
    process = await anyio.open_process(argv, env=server_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://{host}:{port}/mcp"
    try:
        with anyio.fail_after(20):
            await _wait_listening(host, port)
        yield url
    finally:
        process.terminate()
        with anyio.fail_after(10):
            await process.wait()
        await process.aclose()


async def _wait_listening(host: str, port: int) -> None:
    # The server is another process: poll its port until it accepts connections.
    while True:
        try:
            stream = await anyio.connect_tcp(host, port)
        except OSError:
            await anyio.sleep(0.05)
            continue
        await stream.aclose()
        return


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
    assert len(tools.tools) == 9
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
