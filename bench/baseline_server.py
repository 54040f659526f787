"""Baseline for bench/spawn.py: the smallest stdio MCP server the SDK allows (MCPServer, one tool).

Run as `python bench/baseline_server.py`; it serves over stdin/stdout until stdin closes.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("baseline", version="0.0.0", log_level="WARNING")


@mcp.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    mcp.run()
