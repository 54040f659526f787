"""MCP tasks (SEP-2663, protocol 2026-07-28) for Python SDK clients: a `ClientExtension` that polls.

```python
from mcp import Client
from mcp_tasks import TasksExtension

tasks = TasksExtension()
async with Client(server, extensions=[tasks]) as client:
    result = await client.call_tool("run_turn", {"prompt": "..."})  # a CallToolResult, as always
```

With the extension, every `tools/call` declares `io.modelcontextprotocol/tasks`; a server may then answer
with a task (`resultType: "task"`) instead of the result. The extension claims that shape and polls
`tasks/get` (at the server's `pollIntervalMs`, at least `min_poll_s`) until the task ends, then
hands `call_tool` the task's `CallToolResult`: the caller sees no difference, but no single request stays
open for the whole turn, so a host's per-request time limit no longer ends long turns. A `cancelled` task
becomes an `isError` result saying so; a `failed` one raises `MCPError`. Cancelling the caller (its
cancel scope, a timeout around `call_tool`) sends `tasks/cancel` for the task before it re-raises.
`on_task(task_id)` is told each task id as it is created (e.g. to cancel it from elsewhere with
`cancel(client.session, task_id)`). The SDK client applies a call's `read_timeout_seconds` to each poll.

A task whose work waits for its client is `input_required` with `inputRequests` (e.g. an
`elicitation/create` form asking to approve a tool call). With `on_input(key, request)` (the request as
JSON; it returns the response as JSON, e.g. `{"action": "accept", "content": {"decision": "allow_once"}}`)
the helper answers each through `tasks/update`; without it the task is polled on as if working, and the
server decides when it stops waiting. A server answers only what the `tools/call` declared: pass the
SDK client an `elicitation_callback` (and `sampling_callback`) so it declares those capabilities.

Needs only the `mcp` package (2.3); it imports nothing from agent-server.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.client import ClaimContext, ClientExtension, ClientSession, ResultClaim
from pydantic import Field

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
DEFAULT_MIN_POLL_S = 0.05
CANCEL_TIMEOUT_S = 5.0

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]


class _Task(types.Result):
    task_id: str
    status: TaskStatus
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class CreateTaskResult(_Task):
    """What a server answers instead of the result (`resultType: "task"`)."""

    result_type: Literal["task"] = "task"


class DetailedTask(_Task):
    """`tasks/get`: the task, with `result` once completed and `error` once failed."""

    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = Field(default=None)


class TaskIdParams(types.RequestParams):
    task_id: str


class GetTaskRequest(types.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams


class UpdateTaskParams(TaskIdParams):
    input_responses: dict[str, Any]


class UpdateTaskRequest(types.Request[UpdateTaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateTaskParams


InputAnswerer = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


class CancelTaskRequest(types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams


async def get_task(session: ClientSession, task_id: str, timeout_s: float | None = None) -> DetailedTask:
    request = GetTaskRequest(params=TaskIdParams(task_id=task_id))
    return await session.send_request(request, DetailedTask, request_read_timeout_seconds=timeout_s)


async def update(session: ClientSession, task_id: str, responses: dict[str, Any]) -> None:
    """Answer a task's `inputRequests` (keyed as they came)."""
    request = UpdateTaskRequest(params=UpdateTaskParams(task_id=task_id, input_responses=responses))
    await session.send_request(request, types.EmptyResult, request_read_timeout_seconds=CANCEL_TIMEOUT_S)


async def cancel(session: ClientSession, task_id: str) -> None:
    """Ask the server to cancel a task (it acknowledges at once; the task ends `cancelled` soon after)."""
    request = CancelTaskRequest(params=TaskIdParams(task_id=task_id))
    await session.send_request(request, types.EmptyResult, request_read_timeout_seconds=CANCEL_TIMEOUT_S)


class TasksExtension(ClientExtension):
    """Declares the tasks extension and resolves task results by polling (see the module docstring)."""

    identifier = TASKS_EXTENSION

    def __init__(
        self,
        *,
        on_task: Callable[[str], None] | None = None,
        on_input: InputAnswerer | None = None,
        min_poll_s: float = DEFAULT_MIN_POLL_S,
    ):
        self._on_task = on_task
        self._on_input = on_input
        self._min_poll_s = min_poll_s

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self._resolve)]

    async def _resolve(self, created: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
        if self._on_task is not None:
            self._on_task(created.task_id)
        try:
            return await self._poll(created, ctx)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_TIMEOUT_S):
                await cancel(ctx.session, created.task_id)
            raise

    async def _poll(self, created: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
        task: _Task = created
        while True:
            await anyio.sleep(max(self._min_poll_s, (task.poll_interval_ms or 0) / 1000))
            detailed = await get_task(ctx.session, created.task_id, ctx.read_timeout_seconds)
            if detailed.status == "completed" and detailed.result is not None:
                return types.CallToolResult.model_validate(detailed.result)
            if detailed.status == "cancelled":
                text = f"[task cancelled] {detailed.status_message or created.task_id}"
                return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
            if detailed.status == "failed":
                error = detailed.error or {}
                raise MCPError(int(error.get("code", types.INTERNAL_ERROR)), str(error.get("message", "task failed")))
            if detailed.status == "input_required" and self._on_input is not None and detailed.input_requests:
                await self._answer(ctx.session, created.task_id, detailed.input_requests)
                task = created  # poll again soon: the task goes on once it has the answers
                continue
            task = detailed

    async def _answer(self, session: ClientSession, task_id: str, requests: dict[str, Any]) -> None:
        assert self._on_input is not None
        responses = {key: await self._on_input(key, request) for key, request in requests.items()}
        await update(session, task_id, responses)
