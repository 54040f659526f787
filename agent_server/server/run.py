"""Serving the MCP server over a transport."""

from __future__ import annotations

from agent_server.settings import Settings


async def serve_stdio(settings: Settings) -> None:
    """Serve over stdin/stdout until stdin closes.

    Raises:
        ConfigError: the settings name a provider or script that cannot be loaded.
    """
    from mcp.server.stdio import stdio_server

    from agent_server.server.app import create_server

    server = create_server(settings)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
