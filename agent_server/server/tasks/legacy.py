"""`run_turn` as a task in the handshake era: the 2025-11-25 experimental tasks, as VS Code uses them.

`initialize` advertises the `tasks` capability (list, cancel, task-augmented `tools/call`) and `run_turn`
lists `execution.taskSupport: "optional"`. A `tools/call` of `run_turn` whose params carry `task` starts a
background turn and answers a `CreateTaskResult` at once (a middleware answers it, since the SDK would
reshape a tool call's result into a `CallToolResult`); without `task` the call runs as usual. Then:

- `tasks/get`: the task (`working` with the latest progress line, `completed`, `cancelled`);
- `tasks/result`: waits until the turn ends, then returns exactly the `CallToolResult` the synchronous call
  would have returned (a cancelled turn's too: its record says `cancelled`), with the related-task `_meta`;
  while it waits, the turn's questions for its client (`input_required`: an approval, shown as every channel
  shows it, or a mounted server's form) go to the client as `elicitation/create` requests with the
  related-task `_meta`, and the answers back to the turn (the task asks only when its `tools/call` came
  from a client that declared form elicitation; else `approvals.headless` decides);
- `tasks/list`: this connection's tasks, newest first, paged by `nextCursor`;
- `tasks/cancel`: cancels the turn and returns the task (`cancelled`); a task that already ended is `-32602`.

An unknown task (or one of another connection or principal) is `-32602`. The tasks live in the same registry as
the 2026-07-28 ones (`registry.py`), with the same ids, binding and bounds; `ttl` is null (kept while the process
runs, within the registry's bound).
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.shared.message import ServerMessageMetadata
from pydantic import ValidationError

from agent_server.runtime import InputRequest, Park, TurnHandle
from agent_server.server.input_requests import deliver, wire_request
from agent_server.server.principals import caller_runtime
from agent_server.server.tasks.modern import start_task
from agent_server.server.tasks.registry import (
    POLL_INTERVAL_MS,
    UNKNOWN_TASK,
    TaskEntry,
    TaskRegistry,
    cancel_task,
    task_owner,
    task_state,
)
from agent_server.server.tool_kit import Context

logger = logging.getLogger(__name__)

RELATED_TASK = "io.modelcontextprotocol/related-task"
LIST_PAGE = 50


async def start(registry: TaskRegistry, ctx: Context) -> dict[str, Any]:
    """Answer a task-augmented `tools/call` of `run_turn` with its `CreateTaskResult`."""
    params = types.CallToolRequestParams.model_validate(ctx.params)
    started = await start_task(registry, ctx, params.arguments or {})
    if isinstance(started, types.CallToolResult):  # bad arguments: the call's usual error result
        return started.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {"task": await _task(ctx, _entry(registry, ctx, started["taskId"]))}


async def _task(ctx: Context, entry: TaskEntry) -> dict[str, Any]:
    state = await task_state(caller_runtime(ctx), entry)
    task = types.Task(
        task_id=entry.task_id,
        status=state.status,
        status_message=state.message,
        created_at=entry.created_at,
        last_updated_at=state.updated_at,
        ttl=None,
        poll_interval=POLL_INTERVAL_MS,
    )
    return {**task.model_dump(mode="json", by_alias=True, exclude_none=True), "ttl": None}


def _entry(registry: TaskRegistry, ctx: Context, task_id: str) -> TaskEntry:
    entry = registry.get(task_id, task_owner(ctx))
    if entry is None:
        raise MCPError(types.INVALID_PARAMS, UNKNOWN_TASK)
    return entry


async def handle_get(registry: TaskRegistry, ctx: Context, task_id: str) -> dict[str, Any]:
    return await _task(ctx, _entry(registry, ctx, task_id))


async def handle_result(registry: TaskRegistry, ctx: Context, task_id: str) -> dict[str, Any]:
    """Blocks until the turn ends (bounded by the turn's own timeout and the caller's)."""
    entry = _entry(registry, ctx, task_id)
    runtime = caller_runtime(ctx)
    handle = runtime.background_turn(entry.turn_id)
    if handle is not None:
        await _wait_relaying_input(ctx, handle, entry.task_id)
    state = await task_state(runtime, entry)
    if state.result is None:
        failure = state.message if state.status == "failed" else f"task {entry.task_id} is {state.status}"
        raise MCPError(types.INTERNAL_ERROR, failure)
    result = state.result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {**result, "_meta": {**(result.get("_meta") or {}), RELATED_TASK: {"taskId": entry.task_id}}}


async def _wait_relaying_input(ctx: Context, handle: TurnHandle, task_id: str) -> None:
    """Wait until the turn ends, and meanwhile send what it waits for from its client (`input_required`: an
    approval, a mounted server's form) as `elicitation/create` requests tied to the task, answering the turn
    with the client's replies: the 2025-11-25 way, where the client calls `tasks/result` on `input_required`."""
    if handle.park is None or not ctx.session.can_send_request:
        await handle.wait()
        return
    async with anyio.create_task_group() as asking:
        sent: set[str] = set()
        while not handle.done:
            changed = handle.next_change()
            for request in handle.park.pending():
                if request.kind != "model" and request.key not in sent:
                    sent.add(request.key)
                    asking.start_soon(_relay, ctx, handle.park, request, task_id)
            await changed.wait()
        asking.cancel_scope.cancel()  # questions of a turn that ended need no answer


async def _relay(ctx: Context, park: Park, request: InputRequest, task_id: str) -> None:
    """Ask the client one of the turn's input requests and deliver its answer (a failure: a refusal)."""
    wire = wire_request(request)
    assert isinstance(wire, types.ElicitRequest)  # model calls are never relayed (`request.kind`)
    meta: dict[str, Any] = {**(wire.params.meta or {}), RELATED_TASK: {"taskId": task_id}}
    wire = wire.model_copy(update={"params": wire.params.model_copy(update={"meta": meta})})
    related = None if ctx.request_id is None else str(ctx.request_id)
    try:
        answer: object = await ctx.session.send_request(
            wire, types.ElicitResult, metadata=ServerMessageMetadata(related_request_id=related)
        )
    except (MCPError, ValidationError) as exc:
        logger.info("the client did not answer %s of task %s: %s", request.key, task_id, exc)
        answer = {"action": "decline"}
    deliver(park, {request.key: answer})


async def handle_list(registry: TaskRegistry, ctx: Context, cursor: str | None) -> dict[str, Any]:
    entries = registry.owned_by(task_owner(ctx))
    first = _offset(cursor)
    page = entries[first : first + LIST_PAGE]
    tasks = [await _task(ctx, entry) for entry in page]
    more = first + LIST_PAGE < len(entries)
    return {"tasks": tasks, **({"nextCursor": str(first + LIST_PAGE)} if more else {})}


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit():
        raise MCPError(types.INVALID_PARAMS, f"invalid cursor {cursor!r}")
    return int(cursor)


async def handle_cancel(registry: TaskRegistry, ctx: Context, task_id: str) -> dict[str, Any]:
    entry = _entry(registry, ctx, task_id)
    before = await task_state(caller_runtime(ctx), entry)
    if before.status != "working":
        raise MCPError(types.INVALID_PARAMS, f"Cannot cancel task: it is already {before.status}")
    await cancel_task(registry, ctx, entry.task_id)
    return await _task(ctx, entry)
