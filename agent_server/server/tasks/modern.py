"""`run_turn` as an MCP task (DESIGN 3.6), over background turns; this module is the 2026-07-28 half.

On 2026-07-28 (the extension `io.modelcontextprotocol/tasks`, SEP-2663): the server advertises the
extension in `server/discover`; a `run_turn` whose request declares it gets `resultType: "task"` (a
`CreateTaskResult`), never otherwise. `tasks/get` returns the `DetailedTask`: `working` with the latest
progress line as `statusMessage`, `input_required` with `inputRequests` while the turn waits for its client (an
approval, a call of the client's model: `input_requests.py`), `completed` with exactly the `CallToolResult`
the synchronous call would have returned (a failed turn included: `isError` is a tool result, not a
protocol error), `cancelled`; `failed` is left for internal errors. `tasks/update` delivers its
`inputResponses` to the waiting turn, which goes on; it and `tasks/cancel` always acknowledge (the SEP
says so); cancel stops the turn. An unknown task is `-32602` for `tasks/get`.

What a task's turn may wait for comes from the capabilities of the `run_turn` request that created it:
approvals only when it declared (form) elicitation, else the headless policy decides; the client's model
(when none is configured) only when it declared sampling. A task left `input_required` longer than
`park_timeout_s` ends `cancelled`, saying so.

Whose a task is and what it is now: `registry.py`.

The handshake-era tasks (2025-11-25, experimental) are in `legacy.py`, on the same registry (`registry.py`).
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import mcp_types as types
from mcp import MCPError
from pydantic import Field

from agent_server.errors import AgentServerError
from agent_server.server.input_requests import deliver, lend
from agent_server.server.principals import caller_runtime
from agent_server.server.tasks.registry import (
    CHANNEL,
    POLL_INTERVAL_MS,
    UNKNOWN_TASK,
    TaskEntry,
    TaskRegistry,
    TaskState,
    TaskStatus,
    cancel_task,
    task_owner,
    task_state,
)
from agent_server.server.tasks.wire import TaskIdParams, UpdateTaskParams
from agent_server.server.tool_kit import Context, error_result
from agent_server.server.turn_tools import RunTurnParams, begin_background

logger = logging.getLogger(__name__)


async def start_task(
    registry: TaskRegistry, ctx: Context, arguments: dict[str, Any]
) -> types.CallToolResult | dict[str, Any]:
    """`run_turn` as a task: the task, once registered (so `tasks/get` finds it), or the call's error result."""
    runtime = caller_runtime(ctx)
    try:
        params = RunTurnParams.model_validate(arguments)
        handle = await begin_background(runtime, ctx, params, lend(runtime, ctx, CHANNEL))
    except Exception as exc:
        return error_result("run_turn", exc)
    entry = registry.add(runtime, task_owner(ctx), handle.record, params.detail)
    try:
        await registry.share(runtime, entry)
    except AgentServerError as exc:  # the task still works here; other replicas will not know it
        logger.warning("task %s is not shared with other replicas: %s", entry.task_id, exc.message)
    state = await task_state(runtime, entry)
    return _wire(CreateTaskResult(**_task_fields(entry, state)))


def _task_fields(entry: TaskEntry, state: TaskState) -> dict[str, Any]:
    return {
        "task_id": entry.task_id,
        "status": state.status,
        "status_message": state.message,
        "created_at": entry.created_at,
        "last_updated_at": state.updated_at,
        "ttl_ms": None,
        "poll_interval_ms": POLL_INTERVAL_MS,
    }


# --- the wire shapes of SEP-2663 --------------------------------------------------------------


class _Task(types.Result):
    task_id: str
    status: TaskStatus
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = Field(default=None)
    poll_interval_ms: int | None = None


class CreateTaskResult(_Task):
    result_type: Literal["task"] = "task"


class DetailedTaskResult(_Task):
    """`tasks/get`: the task with what its status carries (`result` once completed, `error` if failed)."""

    result_type: Literal["complete"] = "complete"
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None


async def handle_get(registry: TaskRegistry, ctx: Context, params: TaskIdParams) -> dict[str, Any]:
    runtime = caller_runtime(ctx)
    entry = await registry.find(runtime, params.task_id, task_owner(ctx))
    if entry is None:
        raise MCPError(types.INVALID_PARAMS, UNKNOWN_TASK)
    state = await task_state(runtime, entry)
    fields = _task_fields(entry, state)
    if state.status == "completed" and state.result is not None:  # a cancelled task carries no result
        fields["result"] = state.result.model_dump(mode="json", by_alias=True, exclude_none=True)
    if state.status == "failed":
        fields["error"] = {"code": types.INTERNAL_ERROR, "message": state.message}
    if state.input_requests is not None:
        fields["input_requests"] = state.input_requests
    return _wire(DetailedTaskResult(**fields))


def _wire(task: _Task) -> dict[str, Any]:
    """The task as JSON: absent fields left out, but `ttlMs: null` (unlimited) kept, as the SEP requires."""
    return {**task.model_dump(mode="json", by_alias=True, exclude_none=True), "ttlMs": task.ttl_ms}


async def handle_update(registry: TaskRegistry, ctx: Context, params: UpdateTaskParams) -> types.EmptyResult:
    """Acknowledged always (SEP-2663): the responses go to the task's waiting turn, those whose keys it
    waits on (others, and those of an unknown or ended task, are ignored)."""
    entry = registry.get(params.task_id, task_owner(ctx))
    handle = None if entry is None else caller_runtime(ctx).background_turn(entry.turn_id)
    if handle is not None and handle.park is not None and not handle.done:
        deliver(handle.park, params.input_responses)
    return types.EmptyResult(result_type="complete")


async def handle_cancel(registry: TaskRegistry, ctx: Context, params: TaskIdParams) -> types.EmptyResult:
    """Acknowledged always; the turn of a known, running task is cancelled (recorded `cancelled`)."""
    await cancel_task(registry, ctx, params.task_id)
    return types.EmptyResult(result_type="complete")
