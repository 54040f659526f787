"""What the server advertises and routes for MCP tasks, kept light: the task machinery (`tasks.py`,
`legacy_tasks.py`) is imported by the first task request, like every tool handler.

2026-07-28: the extension `io.modelcontextprotocol/tasks` in `server/discover`, methods `tasks/get`,
`tasks/update`, `tasks/cancel`. Handshake era: the 2025-11-25 `tasks` capability in `initialize` (and not
the extension: SEP-2663 forbids advertising both on one version), methods `tasks/get`, `tasks/result`,
`tasks/list`, `tasks/cancel`, and a middleware for task-augmented `tools/call`. The methods of both eras
share names: each handler branches on the request's era.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import mcp_types as types
from mcp import MCPError
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

if TYPE_CHECKING:
    from agent_server.server.tasks import TaskRegistry

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
LEGACY_CAPABILITY = types.ServerTasksCapability(
    list=types.TasksListCapability(),
    cancel=types.TasksCancelCapability(),
    requests=types.ServerTasksRequestsCapability(tools=types.TasksToolsCapability(call=types.TasksCallCapability())),
)


class TaskIdParams(types.RequestParams):
    """`tasks/get`, `tasks/cancel` (and `tasks/result`) of either era."""

    task_id: str
    request_state: str | None = None


class UpdateTaskParams(TaskIdParams):
    input_responses: dict[str, Any] = Field(default_factory=dict[str, Any])


def capabilities(caps: types.ServerCapabilities, protocol_version: str | None) -> types.ServerCapabilities:
    """`caps` with tasks advertised the way `protocol_version`'s era expects (None: the handshake)."""
    if protocol_version in MODERN_PROTOCOL_VERSIONS:
        return caps.model_copy(update={"extensions": {**(caps.extensions or {}), TASKS_EXTENSION: {}}})
    return caps.model_copy(update={"tasks": LEGACY_CAPABILITY})


def _modern(ctx: Any) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _only(ctx: Any, *, modern: bool) -> None:
    if _modern(ctx) != modern:
        raise MCPError(types.METHOD_NOT_FOUND, "Method not found", data=ctx.method)


def wants_legacy_task(ctx: Any) -> bool:
    """A handshake-era `tools/call` of `run_turn` whose params carry `task`."""
    if ctx.method != "tools/call" or _modern(ctx):
        return False
    params: Any = ctx.params
    if not isinstance(params, dict):
        return False
    fields = cast(dict[str, Any], params)
    return fields.get("name") == "run_turn" and fields.get("task") is not None


def declares_tasks(ctx: Any) -> bool:
    """Whether this 2026-07-28 request declares the tasks extension (only then may it get a task)."""
    if not _modern(ctx):
        return False
    caps = ctx.session.client_capabilities
    return bool(caps and caps.extensions and TASKS_EXTENSION in caps.extensions)


class TaskHub:
    """The process's task registry, built by the first task request."""

    def __init__(self) -> None:
        self._registry: TaskRegistry | None = None

    @property
    def registry(self) -> TaskRegistry:
        if self._registry is None:
            from agent_server.server.tasks import TaskRegistry

            self._registry = TaskRegistry()
        return self._registry

    async def start(self, ctx: Any, arguments: dict[str, Any]) -> HandlerResult:
        """`run_turn` as a 2026-07-28 task (the caller checked `declares_tasks`)."""
        from agent_server.server.tasks import start_task

        return await start_task(self.registry, ctx, arguments)


def install(server: Server[Any]) -> TaskHub:
    """Route the task methods of both eras to their handlers (imported on first use)."""
    hub = TaskHub()

    async def get(ctx: Any, params: TaskIdParams) -> HandlerResult:
        if _modern(ctx):
            from agent_server.server import tasks

            return await tasks.handle_get(hub.registry, ctx, params)
        from agent_server.server import legacy_tasks

        return await legacy_tasks.handle_get(hub.registry, ctx, params.task_id)

    async def cancel(ctx: Any, params: TaskIdParams) -> HandlerResult:
        if _modern(ctx):
            from agent_server.server import tasks

            return await tasks.handle_cancel(hub.registry, ctx, params)
        from agent_server.server import legacy_tasks

        return await legacy_tasks.handle_cancel(hub.registry, ctx, params.task_id)

    async def update(ctx: Any, params: UpdateTaskParams) -> HandlerResult:
        _only(ctx, modern=True)
        from agent_server.server import tasks

        return await tasks.handle_update(hub.registry, ctx, params)

    async def result(ctx: Any, params: TaskIdParams) -> HandlerResult:
        _only(ctx, modern=False)  # SEP-2663 removed tasks/result
        from agent_server.server import legacy_tasks

        return await legacy_tasks.handle_result(hub.registry, ctx, params.task_id)

    async def listing(ctx: Any, params: types.PaginatedRequestParams) -> HandlerResult:
        _only(ctx, modern=False)  # SEP-2663 has no tasks/list: tasks cannot be scoped to a caller there
        from agent_server.server import legacy_tasks

        return await legacy_tasks.handle_list(hub.registry, ctx, params.cursor)

    async def middleware(ctx: Any, call_next: CallNext) -> HandlerResult:
        if not wants_legacy_task(ctx):
            return await call_next(ctx)
        from agent_server.server import legacy_tasks

        return await legacy_tasks.start(hub.registry, ctx)

    server.add_request_handler("tasks/get", TaskIdParams, get)
    server.add_request_handler("tasks/cancel", TaskIdParams, cancel)
    server.add_request_handler("tasks/update", UpdateTaskParams, update)
    server.add_request_handler("tasks/result", TaskIdParams, result)
    server.add_request_handler("tasks/list", types.PaginatedRequestParams, listing)
    server.middleware.append(middleware)
    return hub
