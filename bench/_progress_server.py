"""Baseline for bench/token_stream.py: a bare SDK `MCPServer` whose one tool sends progress in a loop.

Run as `python bench/_progress_server.py`; `burst(count, message)` sends `count` `notifications/progress`
(`ctx.report_progress(i, count, message)`) and returns the count.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer

mcp = MCPServer("progress-baseline", version="0.0.0", log_level="WARNING")


@mcp.tool()
async def burst(count: int, ctx: Context, message: str = "tok ") -> int:
    """Send `count` progress notifications, one after another."""
    for i in range(count):
        await ctx.report_progress(i + 1, count, message)
    return count


if __name__ == "__main__":
    mcp.run()
