"""The tasks of this process, for both protocol eras: whose each is, its turn, and what it is now.

Task ids are random (192 bits) and bound to the principal and the connection that created the task (the
server process on stdio, the MCP session on handshake-era HTTP); a 2026-07-28 HTTP request has no connection
identity, so there the task is bound to its principal alone. A task of another principal or connection is
"unknown". Such a task without a connection is also kept in a store that several replicas share (PostgreSQL),
with its principal, so that `tasks/get` and `tasks/cancel` sent to another replica find it (its turn's stored
record then tells its state). The registry keeps at most `MAX_TASKS` tasks per principal, dropping that
principal's oldest finished ones first; a task lives as long as the process (`ttlMs: null`).

A task's state comes from its background turn: `working` with the latest progress line, `input_required` with
`inputRequests` while the turn waits for its client (`input_requests.py`), `completed` with exactly the
`CallToolResult` the synchronous call would have returned (a failed turn included: `isError` is a tool result,
not a protocol error), `cancelled`; `failed` is left for internal errors.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal

import mcp_types as types
from mcp import MCPError

from agent_server.doors.records import Detail
from agent_server.doors.show import describe
from agent_server.errors import AgentServerError, InvalidArgument
from agent_server.runtime import AgentRuntime, progress
from agent_server.server.connections import connection_key
from agent_server.server.input_requests import wire_requests_json
from agent_server.server.principals import caller_runtime, principal_of
from agent_server.server.tool_kit import Context, outcome_result
from agent_server.server.turn_tools import turn_outcome
from agent_server.store.base import SharedTask
from agent_server.types import TurnRecord, utc_now

logger = logging.getLogger(__name__)

MAX_TASKS = 256
POLL_INTERVAL_MS = 1000
TASK_ID_BYTES = 24
UNKNOWN_TASK = "Failed to retrieve task: Task not found"
CHANNEL = "task"
"""The approval channel's name in turn records."""

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]


TaskOwner = tuple[str, str | None]
"""`(principal, connection)`: whose a task is, and the connection it is bound to (None: none, see above)."""


def task_owner(ctx: Context) -> TaskOwner:
    return principal_of(ctx), connection_key(ctx)


@dataclass(frozen=True)
class TaskEntry:
    task_id: str
    owner: TaskOwner
    turn_id: str
    session_id: str
    detail: Detail
    created_at: str


@dataclass(frozen=True)
class TaskState:
    """What a task is now: its status, a one-line message, and, once the turn ended, the `CallToolResult` the
    synchronous call would have returned (a cancelled turn's too: the handshake era's `tasks/result` gives it)."""

    status: TaskStatus
    message: str
    updated_at: str
    result: types.CallToolResult | None = None
    input_requests: dict[str, Any] | None = None
    """With `input_required`: the `inputRequests` map (wire JSON)."""


class TaskRegistry:
    """Tasks of this process (see the module docstring)."""

    def __init__(self, max_tasks: int = MAX_TASKS) -> None:
        self._tasks: OrderedDict[str, TaskEntry] = OrderedDict()
        self._max = max_tasks

    def add(self, runtime: AgentRuntime, owner: TaskOwner, record: TurnRecord, detail: Detail) -> TaskEntry:
        entry = TaskEntry(
            task_id=secrets.token_urlsafe(TASK_ID_BYTES),
            owner=owner,
            turn_id=record.turn_id,
            session_id=record.session_id,
            detail=detail,
            created_at=utc_now(),
        )
        self._tasks[entry.task_id] = entry
        self._evict(runtime, owner[0])
        return entry

    def get(self, task_id: str, owner: TaskOwner) -> TaskEntry | None:
        entry = self._tasks.get(task_id)
        return entry if entry is not None and entry.owner == owner else None

    async def find(self, runtime: AgentRuntime, task_id: str, owner: TaskOwner) -> TaskEntry | None:
        """`get`, or for a request without a connection, a task of its principal another replica created (`share`);
        `runtime` acts for the request's principal."""
        entry = self.get(task_id, owner)
        if entry is not None or owner[1] is not None:
            return entry
        try:
            shared = await runtime.shared_task(task_id)
        except InvalidArgument as exc:  # a malformed task id (the runtime checks ids)
            raise MCPError(types.INVALID_PARAMS, exc.message) from None
        if shared is None:
            return None
        detail: Detail = "full" if shared.detail == "full" else "summary"
        owner = (shared.principal, None)
        return TaskEntry(shared.task_id, owner, shared.turn_id, shared.session_id, detail, shared.created_at)

    async def share(self, runtime: AgentRuntime, entry: TaskEntry) -> None:
        """A task without a connection may be asked about on any replica: keep it in a shared store."""
        if entry.owner[1] is None:
            task = SharedTask(entry.task_id, entry.turn_id, entry.session_id, entry.detail, entry.created_at)
            await runtime.share_task(task)

    def owned_by(self, owner: TaskOwner) -> list[TaskEntry]:
        """This principal's tasks of this connection, newest first."""
        return [entry for entry in reversed(self._tasks.values()) if entry.owner == owner]

    def _evict(self, runtime: AgentRuntime, principal: str) -> None:
        mine = [entry for entry in self._tasks.values() if entry.owner[0] == principal]
        excess = len(mine) - self._max
        for entry in mine:
            if excess <= 0:
                return
            handle = runtime.background_turn(entry.turn_id)
            if handle is None or handle.done:  # a running turn's task stays: limits.background_turns of them
                del self._tasks[entry.task_id]
                excess -= 1


async def task_state(runtime: AgentRuntime, entry: TaskEntry) -> TaskState:
    handle = runtime.background_turn(entry.turn_id)
    if handle is not None and not handle.done and handle.park is not None and handle.awaiting_input:
        requests = wire_requests_json(handle.park)
        waiting = f"waiting for the client's answer to {', '.join(requests)}"
        return TaskState("input_required", waiting, handle.updated_at, input_requests=requests)
    if handle is not None and not handle.done:
        latest = handle.log.latest()
        where = handle.where if handle.stage is not None or latest is None else describe(latest)
        return TaskState("working", progress.status_line(handle.record, where), handle.updated_at)
    try:
        record = handle.record if handle is not None else await runtime.find_turn(entry.turn_id, entry.session_id)
    except AgentServerError as exc:
        return TaskState("failed", exc.message, utc_now())
    return _ended(record, entry.detail)


def _ended(record: TurnRecord, detail: Detail) -> TaskState:
    outcome = turn_outcome(record, detail)
    updated = record.finished_at or utc_now()
    if record.status == "running":  # stored `running` but not followed here: another process runs it
        return TaskState("working", progress.status_line(record, progress.ELSEWHERE), updated)
    status: TaskStatus = "cancelled" if record.status == "cancelled" else "completed"
    return TaskState(
        status, outcome.text if status == "cancelled" else f"turn {record.status}", updated, outcome_result(outcome)
    )


async def cancel_task(registry: TaskRegistry, ctx: Context, task_id: str) -> TaskEntry | None:
    """Cancel the task's turn if it runs; the entry, or None when the task is unknown to this connection."""
    runtime = caller_runtime(ctx)
    entry = await registry.find(runtime, task_id, task_owner(ctx))
    if entry is None:
        return None
    handle = runtime.background_turn(entry.turn_id)
    if handle is not None and not handle.done:
        await runtime.cancel_turn(entry.turn_id)
    elif handle is None and entry.owner[1] is None:  # another replica's task: its turn, if still running there
        with contextlib.suppress(AgentServerError):
            await runtime.cancel_turn(entry.turn_id)
    return entry
