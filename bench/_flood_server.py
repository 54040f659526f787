"""A stdio MCP server with one tool, `flood(size)`, returning `size` characters (for `mounted_result_size.py`)."""

from __future__ import annotations

import warnings

from mcp import MCPDeprecationWarning
from mcp.server.mcpserver import MCPServer

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

server = MCPServer("flood", version="1.0.0", log_level="WARNING")


@server.tool(description="Return `size` characters of text")
async def flood(size: int) -> str:
    return "y" * size


if __name__ == "__main__":
    server.run()
