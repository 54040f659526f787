"""Opening an `mcp.Client` to a mounted server: stdio, Streamable HTTP, or in-process (tests).

A stdio server gets a minimal environment (`agent_server.child_process`: a few variables from the agent
server's environment, when set) plus its entry's `env`, never the rest of the agent server's environment (API keys and
other secrets). Its stderr goes to the agent server's log (see `stdio.py`).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.session import ElicitationFnT, MessageHandlerFnT
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server
from mcp.server.mcpserver import MCPServer

from agent_server.child_process import minimal_environment
from agent_server.mounts.config import MountConfig
from agent_server.mounts.stdio import StdioProcess
from agent_server.version import NAME, version

InProcessServer = Server[Any] | MCPServer

MAX_TOOL_PAGES = 1000
HTTP_TIMEOUT = httpx2.Timeout(30, read=300)
"""Connect/write/pool 30 s; reads 300 s (a response stream stays open); calls have their own timeout."""
KEEPALIVE = 100
"""Idle connections to one mounted server kept for the next calls (httpx2's default keeps 20)."""


def stdio_environment(config: MountConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """The minimal environment with the entry's `env` added."""
    return minimal_environment(environ) | config.env


def client_info() -> types.Implementation:
    return types.Implementation(name=NAME, version=version())


@asynccontextmanager
async def open_client(
    config: MountConfig,
    *,
    environ: Mapping[str, str],
    mode: str,
    in_process: InProcessServer | None,
    stop_grace_s: float,
    on_message: MessageHandlerFnT,
    on_spawn: Callable[[StdioProcess], None],
    on_elicit: ElicitationFnT | None = None,
) -> AsyncGenerator[Client]:
    """Connect, negotiate and yield the client; `on_spawn` gets a stdio server's process before it starts."""
    async with AsyncExitStack() as stack:
        target: Any
        if in_process is not None:
            target = in_process
        elif config.url is not None:
            limits = httpx2.Limits(max_connections=config.max_connections, max_keepalive_connections=KEEPALIVE)
            client = httpx2.AsyncClient(headers=config.headers, timeout=HTTP_TIMEOUT, limits=limits)
            http = await stack.enter_async_context(client)
            target = streamable_http_client(config.url, http_client=http)
        else:
            assert config.command is not None
            env = stdio_environment(config, environ)
            if sys.platform == "win32":  # pragma: no cover - the SDK's transport, stderr to ours
                params = StdioServerParameters(command=config.command, args=config.args, env=env, cwd=config.cwd)
                target = stdio_client(params, errlog=sys.stderr)
            else:
                process = StdioProcess(
                    config.name, config.command, config.args, env=env, cwd=config.cwd, stop_grace_s=stop_grace_s
                )
                on_spawn(process)
                target = process.transport()
        client = Client(
            target, mode=mode, message_handler=on_message, elicitation_callback=on_elicit, client_info=client_info()
        )
        yield await stack.enter_async_context(client)


async def list_all_tools(client: Client, *, refresh: bool = False) -> list[types.Tool]:
    """Every page of `tools/list` (at most `MAX_TOOL_PAGES`: a paginator that never ends cannot hang us)."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh" if refresh else "use")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools
