"""Serving the MCP server over a transport: stdio (default) or Streamable HTTP."""

from __future__ import annotations

import logging

from agent_server.settings import Settings

logger = logging.getLogger(__name__)

LOOPBACK = ("127.0.0.1", "localhost", "::1")


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


async def serve_http(settings: Settings, *, host: str, port: int) -> None:
    """Serve Streamable HTTP at `http://HOST:PORT/mcp` until interrupted.

    On a loopback host the SDK's DNS-rebinding protection is on (Host and Origin headers must be
    loopback). Binding elsewhere exposes the agent to the network: a warning is logged.

    Raises:
        ConfigError: the settings name a provider or script that cannot be loaded.
    """
    import uvicorn

    from agent_server.server.app import create_server

    if host not in LOOPBACK:
        logger.warning("serving on %s: the agent is reachable from the network and has no authentication", host)
    server = create_server(settings)
    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level=settings.log_level.lower(), lifespan="on")
    await uvicorn.Server(config).serve()
