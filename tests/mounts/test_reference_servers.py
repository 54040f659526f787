"""Mounts against the official reference servers from npm: filesystem and everything (stdio and
Streamable HTTP), including a Streamable HTTP server killed mid-call and started again."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from subprocess import DEVNULL

import anyio
import pytest

from agent_server.mounts.config import MountConfig, parse_mcp_servers
from agent_server.types import ImagePart, ToolCall, ToolResult
from tests.unit.mounts.helpers import Progress, alive, mounted, poll_until

pytestmark = pytest.mark.anyio


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path.resolve()  # the server compares real paths
    (root / "notes.txt").write_text("remember the milk\n")
    (root / "src").mkdir()
    return root


async def test_filesystem_server_lists_a_directory(filesystem_server: Path, root: Path) -> None:
    doc = {"mcpServers": {"fs": {"command": "node", "args": [str(filesystem_server), str(root)]}}}
    async with mounted(parse_mcp_servers(doc, environ=os.environ)) as manager:
        (state,) = manager.states()
        assert state["state"] == "ready", state
        tools = {t.name: t for t in await manager.list_tools()}
        assert {"fs__list_directory", "fs__read_text_file"} <= tools.keys()
        assert tools["fs__list_directory"].source == "mcp:fs"
        assert "path" in tools["fs__list_directory"].input_schema["properties"]
        listing = await manager.call_tool(ToolCall(id="c1", name="fs__list_directory", arguments={"path": str(root)}))
        assert not listing.is_error, listing
        assert "[FILE] notes.txt" in listing.text() and "[DIR] src" in listing.text()
        content = await manager.call_tool(
            ToolCall(id="c2", name="fs__read_text_file", arguments={"path": str(root / "notes.txt")})
        )
        assert "remember the milk" in content.text()
        outside = await manager.call_tool(ToolCall(id="c3", name="fs__list_directory", arguments={"path": "/"}))
        assert outside.is_error  # the server's own refusal is data for the model


async def test_everything_server_progress_images_and_structured_content(everything_server: Path) -> None:
    config = MountConfig(name="everything", command="node", args=[str(everything_server), "stdio"])
    async with mounted([config]) as manager:
        tools = {t.name for t in await manager.list_tools()}
        assert "everything__trigger-long-running-operation" in tools
        progress = Progress()
        started = time.perf_counter()
        result = await manager.call_tool(
            ToolCall(id="c1", name="everything__trigger-long-running-operation", arguments={"duration": 1, "steps": 5}),
            on_progress=progress,
        )
        assert not result.is_error and "Long running operation completed" in result.text()
        assert progress.updates[-1] == (5, 5, None)
        assert [p for p, _, _ in progress.updates] == [1, 2, 3, 4, 5]  # 0.2 s apart: each one forwarded
        assert time.perf_counter() - started >= 1
        image = await manager.call_tool(ToolCall(id="c2", name="everything__get-tiny-image", arguments={}))
        assert any(isinstance(part, ImagePart) and part.mime_type == "image/png" for part in image.content)
        structured = await manager.call_tool(
            ToolCall(id="c3", name="everything__get-structured-content", arguments={"location": "New York"})
        )
        assert structured.structured is not None and "temperature" in structured.structured


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@asynccontextmanager
async def everything_over_http(entry: Path, port: int) -> AsyncGenerator[int]:
    process = await anyio.open_process(
        ["node", str(entry), "streamableHttp"],
        env={"PATH": os.environ["PATH"], "PORT": str(port)},
        stdin=DEVNULL,
        stdout=DEVNULL,
        stderr=DEVNULL,
        start_new_session=True,
    )
    try:
        await poll_until(lambda: listening(port), timeout=15)
        yield process.pid
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
        with anyio.CancelScope(shield=True), anyio.fail_after(5):
            await process.wait()
        await process.aclose()


async def test_everything_server_over_streamable_http_killed_mid_call_and_back(
    everything_server: Path, free_tcp_port: int
) -> None:
    url = f"http://127.0.0.1:{free_tcp_port}/mcp"
    config = MountConfig(name="web", url=url, timeout_s=30)
    async with everything_over_http(everything_server, free_tcp_port) as pid, mounted([config]) as manager:
        assert manager.states()[0]["state"] == "ready"
        echo = await manager.call_tool(ToolCall(id="c1", name="web__echo", arguments={"message": "over http"}))
        assert "over http" in echo.text()
        progress, results = Progress(), list[ToolResult]()
        killed_at = 0.0

        async def long_call() -> None:
            results.append(
                await manager.call_tool(
                    ToolCall(
                        id="c2", name="web__trigger-long-running-operation", arguments={"duration": 20, "steps": 40}
                    ),
                    on_progress=progress,
                )
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(long_call)
            with anyio.fail_after(10):
                await progress.arrived.wait()  # the call is running in the node process
            killed_at = time.perf_counter()
            os.killpg(pid, signal.SIGKILL)
        assert time.perf_counter() - killed_at < 5  # not the 30 s timeout (the SDK retries the stream for ~2 s)
        (result,) = results
        assert result.is_error, result
        assert manager.states()[0]["state"] == "failed"
        assert not alive(pid)

        async with everything_over_http(everything_server, free_tcp_port):
            back = await manager.call_tool(ToolCall(id="c3", name="web__echo", arguments={"message": "again"}))
            assert not back.is_error and "again" in back.text()
            assert manager.states()[0]["state"] == "ready"
