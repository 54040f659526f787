"""What the server advertises for MCP tasks and the params of their methods, kept light (the start path reads
it; the task machinery is imported by the first task request, `routes.py`).

2026-07-28: the extension `io.modelcontextprotocol/tasks` in `server/discover`, methods `tasks/get`,
`tasks/update`, `tasks/cancel`. Handshake era: the 2025-11-25 `tasks` capability in `initialize` (and not
the extension: SEP-2663 forbids advertising both on one version), methods `tasks/get`, `tasks/result`,
`tasks/list`, `tasks/cancel`, and a middleware for task-augmented `tools/call`. The methods of both eras
share names: each handler branches on the request's era.
"""

from typing import Any, cast

import mcp_types as types
from mcp import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

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


def modern(ctx: Any) -> bool:
    """Whether the request is of protocol 2026-07-28 (else the handshake era)."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def only(ctx: Any, *, modern_era: bool) -> None:
    """Refuse a method of the other era as unknown."""
    if modern(ctx) != modern_era:
        raise MCPError(types.METHOD_NOT_FOUND, "Method not found", data=ctx.method)


def wants_legacy_task(ctx: Any) -> bool:
    """A handshake-era `tools/call` of `run_turn` whose params carry `task`."""
    if ctx.method != "tools/call" or modern(ctx):
        return False
    params: Any = ctx.params
    if not isinstance(params, dict):
        return False
    fields = cast(dict[str, Any], params)
    return fields.get("name") == "run_turn" and fields.get("task") is not None


def declares_tasks(ctx: Any) -> bool:
    """Whether this 2026-07-28 request declares the tasks extension (only then may it get a task)."""
    if not modern(ctx):
        return False
    caps = ctx.session.client_capabilities
    return bool(caps and caps.extensions and TASKS_EXTENSION in caps.extensions)
