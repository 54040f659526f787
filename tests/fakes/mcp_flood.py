"""A fake stdio MCP server whose `flood` tool writes megabytes to stdout without a newline (a broken or
hostile server), and whose `line` tool answers with one very long JSON-RPC line.

Run as `python tests/fakes/mcp_flood.py`.
"""

from __future__ import annotations

import os

import anyio
from mcp.server.mcpserver import MCPServer

MEGABYTE = b"x" * (1 << 20)
WIRE = os.dup(1)
"""The real stdout, taken before the SDK points fd 1 elsewhere (it keeps stray writes off the wire)."""


def build() -> MCPServer:
    mcp = MCPServer("fake-flood", version="1.0.0", log_level="WARNING")

    @mcp.tool(description="Write `megabytes` MB to stdout with no newline, then wait")
    async def flood(megabytes: int) -> str:  # pyright: ignore[reportUnusedFunction]
        for _ in range(megabytes):
            await anyio.to_thread.run_sync(os.write, WIRE, MEGABYTE)  # the pipe pushes back: do not hold the loop
        await anyio.sleep(3600)
        return "unreachable"

    @mcp.tool(description="A text result of `megabytes` MB (one long line on the wire)")
    async def line(megabytes: int) -> str:  # pyright: ignore[reportUnusedFunction]
        return "y" * (megabytes << 20)

    @mcp.tool(description="Answer ok")
    async def ping() -> str:  # pyright: ignore[reportUnusedFunction]
        return "ok"

    return mcp


if __name__ == "__main__":
    build().run()
