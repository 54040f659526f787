"""Routing of the MCP task methods of both eras to their handlers, imported by the first task request.

2026-07-28: `tasks/get`, `tasks/update`, `tasks/cancel` (`modern.py`). Handshake era: `tasks/get`, `tasks/result`,
`tasks/list`, `tasks/cancel`, and a middleware for task-augmented `tools/call` (`legacy.py`). The methods of both
eras share names: each handler branches on the request's era (`wire.modern`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult

from agent_server.server.tasks.wire import TaskIdParams, UpdateTaskParams, modern, only, wants_legacy_task

if TYPE_CHECKING:
    from agent_server.server.tasks.registry import TaskRegistry


class TaskHub:
    """The process's task registry, built by the first task request."""

    def __init__(self) -> None:
        self._registry: TaskRegistry | None = None

    @property
    def registry(self) -> TaskRegistry:
        if self._registry is None:
            from agent_server.server.tasks.registry import TaskRegistry

            self._registry = TaskRegistry()
        return self._registry

    async def start(self, ctx: Any, arguments: dict[str, Any]) -> HandlerResult:
        """`run_turn` as a 2026-07-28 task (the caller checked `declares_tasks`)."""
        from agent_server.server.tasks.modern import start_task

        return await start_task(self.registry, ctx, arguments)


def install(server: Server[Any]) -> TaskHub:
    """Route the task methods of both eras to their handlers (imported on first use)."""
    hub = TaskHub()

    async def get(ctx: Any, params: TaskIdParams) -> HandlerResult:
        if modern(ctx):
            from agent_server.server.tasks import modern as handlers

            return await handlers.handle_get(hub.registry, ctx, params)
        from agent_server.server.tasks import legacy

        return await legacy.handle_get(hub.registry, ctx, params.task_id)

    async def cancel(ctx: Any, params: TaskIdParams) -> HandlerResult:
        if modern(ctx):
            from agent_server.server.tasks import modern as handlers

            return await handlers.handle_cancel(hub.registry, ctx, params)
        from agent_server.server.tasks import legacy

        return await legacy.handle_cancel(hub.registry, ctx, params.task_id)

    async def update(ctx: Any, params: UpdateTaskParams) -> HandlerResult:
        only(ctx, modern_era=True)
        from agent_server.server.tasks import modern as handlers

        return await handlers.handle_update(hub.registry, ctx, params)

    async def result(ctx: Any, params: TaskIdParams) -> HandlerResult:
        only(ctx, modern_era=False)  # SEP-2663 removed tasks/result
        from agent_server.server.tasks import legacy

        return await legacy.handle_result(hub.registry, ctx, params.task_id)

    async def listing(ctx: Any, params: types.PaginatedRequestParams) -> HandlerResult:
        only(ctx, modern_era=False)  # SEP-2663 has no tasks/list: tasks cannot be scoped to a caller there
        from agent_server.server.tasks import legacy

        return await legacy.handle_list(hub.registry, ctx, params.cursor)

    async def middleware(ctx: Any, call_next: CallNext) -> HandlerResult:
        if not wants_legacy_task(ctx):
            return await call_next(ctx)
        from agent_server.server.tasks import legacy

        return await legacy.start(hub.registry, ctx)

    server.add_request_handler("tasks/get", TaskIdParams, get)
    server.add_request_handler("tasks/cancel", TaskIdParams, cancel)
    server.add_request_handler("tasks/update", UpdateTaskParams, update)
    server.add_request_handler("tasks/result", TaskIdParams, result)
    server.add_request_handler("tasks/list", types.PaginatedRequestParams, listing)
    server.middleware.append(middleware)
    return hub
