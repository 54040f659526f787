"""The MCP front door: an SDK low-level `Server` over an `AgentRuntime`, serving both protocol eras.

`create_server(settings)` checks the settings at once (a bad model or mount entry fails here, not at
the first call). The server's lifespan is the runtime's: mounted servers start in the background;
the handlers, the turn machinery and the store load once the client has listed the tools
(`_prepare_after`, in worker threads) or at the first `tools/call`, whichever comes first, so that
starting and listing tools cost no more than the SDK itself. `tools/list` is served from the
generated `tools.json`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.context import HandlerResult
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from agent_server.runtime import AgentRuntime
from agent_server.server.agent_listing import AgentTools, as_run_turn
from agent_server.server.listing import tool_names, wire_tools
from agent_server.server.tasks.routes import TaskHub
from agent_server.server.tasks.routes import install as install_tasks
from agent_server.server.tasks.wire import capabilities as task_capabilities
from agent_server.server.tasks.wire import declares_tasks
from agent_server.settings import Settings
from agent_server.version import NAME, version

if TYPE_CHECKING:
    from agent_server.llm.base import LLMClient
    from agent_server.runtime import InProcessServer

logger = logging.getLogger(__name__)

SERVER_NAME = NAME
INSTRUCTIONS = (
    "agent-server runs an LLM agent over this workspace. Call run_turn with a prompt to run one agent "
    "turn (progress streams as notifications); sessions persist across restarts (session_* tools); "
    "compact summarises old history."
)
Context = ServerRequestContext[AgentRuntime, Any]
PREPARE_DELAY_S = 0.01
"""After the first `tools/list` answer, how long to wait before preparing the runtime (`_prepare_after`)."""


def _lifespan(
    runtime: AgentRuntime, listed: anyio.Event
) -> Callable[[Server[AgentRuntime]], AbstractAsyncContextManager[AgentRuntime]]:
    @asynccontextmanager
    async def lifespan(_server: Server[AgentRuntime]) -> AsyncGenerator[AgentRuntime]:
        async with runtime, anyio.create_task_group() as tg:
            tg.start_soon(_prepare_after, listed, runtime)
            yield runtime
            tg.cancel_scope.cancel()

    return lifespan


async def _prepare_after(listed: anyio.Event, runtime: AgentRuntime) -> None:
    """Once the client has listed the tools, load the handlers and the turn machinery and open the store.

    Hosts list the tools right after the handshake and call one later (when the user asks), so the first
    call finds everything loaded. Not earlier: the imports run in worker threads but hold the GIL, and
    would slow the handshake and `tools/list` answers down; `PREPARE_DELAY_S` lets that answer be
    written first. A call that arrives before is served as before (it loads what it needs itself), and
    a store that cannot be opened is left to the calls to report.
    """
    from agent_server.errors import StoreError

    await listed.wait()
    await anyio.sleep(PREPARE_DELAY_S)
    await anyio.to_thread.run_sync(_load_run_turn)
    try:
        await runtime.prepare()
    except StoreError as exc:
        logger.debug("preparing the runtime: %s", exc)


def _load_run_turn() -> None:
    """Import the tool table and `run_turn`'s module (the session tools load with their first call)."""
    from agent_server.server.tool_table import tool

    tool("run_turn")


def create_server(
    settings: Settings,
    *,
    llm: LLMClient | None = None,
    in_process_mounts: Mapping[str, InProcessServer] | None = None,
) -> Server[AgentRuntime]:
    """The MCP server for these settings; `llm` overrides the provider named in the settings.

    `in_process_mounts` connects the named mounts to in-process servers instead of their
    `command`/`url` (for tests and embedding).

    Raises:
        ConfigError: the settings name a provider or mounts that cannot be built.
    """
    runtime = AgentRuntime(settings, llm=llm, in_process_mounts=in_process_mounts)
    listed = anyio.Event()
    hub: TaskHub | None = None
    agents = AgentTools(runtime)

    async def list_tools(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        listed.set()
        return types.ListToolsResult(tools=[*wire_tools(), *await agents.tools()])

    async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> HandlerResult:
        if await agents.changed() and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            await ctx.session.send_tool_list_changed()
        if params.name not in tool_names():
            agent = await agents.agent_of(params.name)
            if agent is None:
                raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
            try:
                params = as_run_turn(params, agent)
            except ValueError as exc:
                raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        if params.name == "run_turn" and hub is not None and declares_tasks(ctx):
            return await hub.start(ctx, params.arguments or {})
        if params.name == "run_turn" and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            from agent_server.server.rounds import call_run_turn

            rounds = await call_run_turn(ctx, params)
            if rounds is not None:
                return rounds
        from agent_server.server.tool_table import call_tool

        return await call_tool(params.name, ctx, params.arguments or {})

    server = _AgentServer(
        SERVER_NAME,
        version=version(),
        instructions=INSTRUCTIONS,
        lifespan=_lifespan(runtime, listed),
        on_list_tools=list_tools,
    )
    # Registered as a plain handler: a `run_turn` as a task answers a `resultType: "task"` result.
    server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
    hub = install_tasks(server)
    # 2026-07-28 `run_turn` rounds (`rounds.py`): the SDK seals and checks every `requestState` here, right
    # inside OpenTelemetry, under the configured keys (shared by replicas) or a key of this process.
    boundary = RequestStateBoundary(_request_state_security(settings), default_audience=SERVER_NAME)
    server.middleware.insert(1, boundary)
    return server


def _request_state_security(settings: Settings) -> RequestStateSecurity:
    keys = [key.get_secret_value() for key in settings.request_state_keys]
    return RequestStateSecurity(keys=keys) if keys else RequestStateSecurity.ephemeral()


class _AgentServer(Server[AgentRuntime]):
    """The SDK's low-level server, advertising MCP tasks the way each protocol era expects (`tasks.wire`)."""

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        given = notification_options or NotificationOptions()
        # Named agents are tools, and their set changes with the workspace's definition files (`agent_listing`).
        notify = NotificationOptions(given.prompts_changed, given.resources_changed, tools_changed=True)
        caps = super().get_capabilities(
            notify, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        return task_capabilities(caps, protocol_version)
