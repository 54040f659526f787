"""A fake MCP server to mount: echo, structured and image results, errors, progress, crash, list changes.

Used in-process (`build()`) and as a stdio subprocess (`python tests/fakes/mcp_echo.py [--name N]
[--pid-file PATH] [--hello]`): `--hello` writes a line to stderr at startup (and a stray line to fd 1
is never written: stdout is the wire).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import MCPDeprecationWarning
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

TINY_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def build(name: str = "fake-echo") -> MCPServer:
    mcp = MCPServer(name, version="1.0.0", log_level="WARNING")

    @mcp.tool(description="Echo the text back")
    async def echo(text: str) -> str:
        return text

    @mcp.tool(description="Add two integers")
    async def add(a: int, b: int) -> int:
        return a + b

    @mcp.tool(description="A tiny PNG and a caption")
    async def image() -> types.CallToolResult:
        return types.CallToolResult(
            content=[
                types.TextContent(type="text", text="a red dot"),
                types.ImageContent(type="image", data=TINY_PNG, mime_type="image/png"),
            ],
            structured_content={"width": 1, "height": 1},
        )

    @mcp.tool(description="Always fails with the given message")
    async def fail(message: str) -> str:
        raise ToolError(message)

    _add_progress_tools(mcp)
    _add_process_tools(mcp)
    _add_introspection_tools(mcp)
    return mcp


def _add_progress_tools(mcp: MCPServer) -> None:
    @mcp.tool(description="Report progress `steps` times, `delay` seconds apart")
    async def slow(ctx: Context, steps: int = 3, delay: float = 0.05) -> str:
        for i in range(steps):
            await ctx.report_progress(i + 1, steps, f"step {i + 1}/{steps}")
            await anyio.sleep(delay)
        return f"done {steps} steps"

    @mcp.tool(description="Send `n` progress notifications as fast as possible")
    async def burst(ctx: Context, n: int = 5000) -> int:
        for i in range(n):
            await ctx.report_progress(i + 1, n, f"tick {i + 1}")
        return n


def _add_process_tools(mcp: MCPServer) -> None:
    @mcp.tool(description="Sleep; write 'started' to `started` first; if cancelled, write 'cancelled' to `marker`")
    async def sleep(seconds: float, marker: str = "", started: str = "") -> str:
        if started:
            await anyio.Path(started).write_text("started")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            if marker:
                with anyio.CancelScope(shield=True):
                    await anyio.Path(marker).write_text("cancelled")
            raise
        return "slept"

    @mcp.tool(description="Exit the process at once, without answering")
    async def crash(code: int = 3) -> str:
        print("crashing on purpose", file=sys.stderr, flush=True)
        os._exit(code)


def _add_introspection_tools(mcp: MCPServer) -> None:
    @mcp.tool(description="This server process's pid")
    async def pid() -> int:
        return os.getpid()

    @mcp.tool(description="Environment variables by name (null when unset)")
    async def env(names: list[str]) -> dict[str, Any]:
        return {name: os.environ.get(name) for name in names}

    @mcp.tool(description="An HTTP request header of this call (null on stdio)")
    async def header(name: str, ctx: Context) -> str | None:
        headers = ctx.headers
        return None if headers is None else headers.get(name)

    @mcp.tool(description="Add a tool named `extra` and announce that the tool list changed")
    async def grow(ctx: Context) -> str:
        if "extra" not in {t.name for t in await mcp.list_tools()}:
            mcp.add_tool(_extra, name="extra", description="Added by grow")
        if ctx.session.can_send_request:
            await ctx.session.send_tool_list_changed()
        else:
            await ctx.notify_tools_changed()
        return "grown"


async def _extra() -> str:
    return "extra!"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="fake-echo")
    parser.add_argument("--pid-file")
    parser.add_argument("--hello", action="store_true")
    args = parser.parse_args()
    if args.pid_file:
        Path(args.pid_file).write_text(str(os.getpid()))
    if args.hello:
        print(f"hello from {args.name} on stderr", file=sys.stderr, flush=True)
    build(args.name).run()


if __name__ == "__main__":
    main()
