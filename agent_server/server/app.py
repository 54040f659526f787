"""Composition root: picks the concrete store, model and tools, and builds the MCP server.

`create_server(settings)` returns an SDK low-level `Server` serving both protocol eras. Its
lifespan opens the store (marking turns left `running` by a dead process as `interrupted`
before anything is served), starts the mounted MCP servers in the background (serving never
waits for them), and on shutdown stops every mount and closes the store.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext

from agent_server.errors import ConfigError
from agent_server.llm.base import LLMClient
from agent_server.mounts.config import MountConfig, load_mcp_config_file, parse_mcp_servers
from agent_server.mounts.toolset import InProcessServer, MountManager
from agent_server.server import handlers
from agent_server.server.models import fixed_llm
from agent_server.server.state import AppState
from agent_server.server.tool_table import TOOLS, tool_schemas
from agent_server.settings import Settings
from agent_server.store.sqlite import SqliteStore
from agent_server.tools.builtin import WorkspaceToolset
from agent_server.tools.registry import ToolRegistry

SERVER_NAME = "agent-server"
INSTRUCTIONS = (
    "agent-server runs an LLM agent over this workspace. Call run_turn with a prompt to run one agent "
    "turn (progress streams as notifications); sessions persist across restarts (session_* tools); "
    "compact summarises old history."
)


def mount_configs(settings: Settings, environ: Mapping[str, str]) -> list[MountConfig]:
    """The servers to mount: the config's `mcpServers`, then the `--mcp-config` file's.

    Raises:
        ConfigError: an entry is invalid, or one name is configured twice.
    """
    configs = parse_mcp_servers(settings.mcp_servers, environ=environ) if settings.mcp_servers else []
    if settings.mcp_config is not None:
        configs += load_mcp_config_file(settings.mcp_config, environ=environ)
    names = [c.name for c in configs]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise ConfigError(f"MCP server {twice[0]!r} is configured twice (config file and --mcp-config)")
    return configs


def build_state_factory(
    settings: Settings, llm: LLMClient | None, mounts: list[MountConfig], in_process: Mapping[str, InProcessServer]
) -> Callable[[Server[AppState]], AbstractAsyncContextManager[AppState]]:
    @asynccontextmanager
    async def lifespan(_server: Server[AppState]) -> AsyncGenerator[AppState]:
        store = await SqliteStore.open(settings.state_path)
        try:
            async with MountManager(mounts, in_process=in_process) as mounted:
                workspace = WorkspaceToolset(
                    settings.workspace,
                    read_max_bytes=settings.read_file_max_bytes,
                    search_max_matches=settings.search_max_matches,
                )
                registry = ToolRegistry([workspace, mounted])
                yield AppState(settings=settings, store=store, llm=llm, registry=registry, mounts=mounted)
        finally:
            await store.close()

    return lifespan


def create_server(
    settings: Settings,
    *,
    llm: LLMClient | None = None,
    in_process_mounts: Mapping[str, InProcessServer] | None = None,
) -> Server[AppState]:
    """The MCP server for these settings; `llm` overrides the provider named in the settings.

    `in_process_mounts` connects the named mounts to in-process servers instead of their
    `command`/`url` (for tests and embedding).

    Raises:
        ConfigError: the settings name a provider or mounts that cannot be built (checked here, not at first use).
    """
    if llm is None:
        llm = fixed_llm(settings)
    mounts = mount_configs(settings, os.environ)
    MountManager(mounts)  # validates names and prefixes now, so a clash fails at startup

    async def list_tools(
        ctx: ServerRequestContext[AppState, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_wire_tool(t) for t in TOOLS.values()])

    async def call_tool(
        ctx: ServerRequestContext[AppState, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = TOOLS.get(params.name)
        if tool is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        return await handlers.call_tool(tool, ctx.lifespan_context, ctx, params.arguments or {})

    return Server(
        SERVER_NAME,
        version=_version(),
        instructions=INSTRUCTIONS,
        lifespan=build_state_factory(settings, llm, mounts, in_process_mounts or {}),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _wire_tool(tool: handlers.ToolDef) -> types.Tool:
    input_schema, output_schema = tool_schemas(tool.name)
    return types.Tool(
        name=tool.name, description=tool.description, input_schema=input_schema, output_schema=output_schema
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agent-server")
    except PackageNotFoundError:
        return "0.0.0"
