"""Composition root: picks the concrete store, model and tools, and builds the MCP server.

`create_server(settings)` returns an SDK low-level `Server` serving both protocol eras. Its
lifespan starts the mounted MCP servers in the background (serving never waits for them); the
store, the workspace tools and the tool handlers are loaded on the first `tools/call`
(`composition.LazyState`), so that starting and listing tools cost no more than the SDK itself.
On shutdown every mount is stopped and the store closed.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext

from agent_server.errors import ConfigError
from agent_server.server.composition import LazyState
from agent_server.server.listing import tool_names, wire_tools
from agent_server.server.models import fixed_llm
from agent_server.settings import Settings

if TYPE_CHECKING:
    from agent_server.llm.base import LLMClient
    from agent_server.mounts.config import MountConfig
    from agent_server.mounts.toolset import InProcessServer

SERVER_NAME = "agent-server"
INSTRUCTIONS = (
    "agent-server runs an LLM agent over this workspace. Call run_turn with a prompt to run one agent "
    "turn (progress streams as notifications); sessions persist across restarts (session_* tools); "
    "compact summarises old history."
)
Context = ServerRequestContext[LazyState, Any]


def mount_configs(settings: Settings, environ: Mapping[str, str]) -> list[MountConfig]:
    """The servers to mount: the config's `mcpServers`, then the `--mcp-config` file's.

    Raises:
        ConfigError: an entry is invalid, or one name is configured twice.
    """
    if not settings.mcp_servers and settings.mcp_config is None:
        return []
    from agent_server.mounts.config import load_mcp_config_file, parse_mcp_servers

    configs = parse_mcp_servers(settings.mcp_servers, environ=environ) if settings.mcp_servers else []
    if settings.mcp_config is not None:
        configs += load_mcp_config_file(settings.mcp_config, environ=environ)
    names = [c.name for c in configs]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise ConfigError(f"MCP server {twice[0]!r} is configured twice (config file and --mcp-config)")
    return configs  # clashing prefixes are no error: only the clashing tools are dropped (agent_tools says why)


def build_lifespan(
    settings: Settings, llm: LLMClient | None, mounts: list[MountConfig], in_process: Mapping[str, InProcessServer]
) -> Callable[[Server[LazyState]], AbstractAsyncContextManager[LazyState]]:
    @asynccontextmanager
    async def lifespan(_server: Server[LazyState]) -> AsyncGenerator[LazyState]:
        async with AsyncExitStack() as stack:
            manager = None
            if mounts:
                from agent_server.mounts.toolset import MountManager

                manager = MountManager(mounts, in_process=in_process, result_max_bytes=settings.mount_result_max_bytes)
                await stack.enter_async_context(manager)
            state = LazyState(settings, llm, manager)
            stack.push_async_callback(state.aclose)
            yield state

    return lifespan


def create_server(
    settings: Settings,
    *,
    llm: LLMClient | None = None,
    in_process_mounts: Mapping[str, InProcessServer] | None = None,
) -> Server[LazyState]:
    """The MCP server for these settings; `llm` overrides the provider named in the settings.

    `in_process_mounts` connects the named mounts to in-process servers instead of their
    `command`/`url` (for tests and embedding).

    Raises:
        ConfigError: the settings name a provider or mounts that cannot be built (checked here, not at first use).
    """
    if llm is None:
        llm = fixed_llm(settings)
    mounts = mount_configs(settings, os.environ)

    async def list_tools(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=wire_tools())

    async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in tool_names():
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        from agent_server.server.dispatch import dispatch

        return await dispatch(params.name, ctx.lifespan_context, ctx, params.arguments or {})

    return Server(
        SERVER_NAME,
        version=_version(),
        instructions=INSTRUCTIONS,
        lifespan=build_lifespan(settings, llm, mounts, in_process_mounts or {}),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agent-server")
    except PackageNotFoundError:
        return "0.0.0"
