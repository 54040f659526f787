"""Loop events -> MCP notifications for the request that runs the turn.

Every event becomes a `notifications/progress` on the caller's progress token (a no-op when
the caller sent none), with a strictly increasing `progress` and a one-line `message`. Clients
that advertise the `EVENTS_EXTENSION` client extension also get every event in full as a
`notifications/agent_server/event`. Token deltas are coalesced: they are buffered and sent as
one event at most every `flush_interval` seconds, and always before the next non-token event.

Heartbeat (DESIGN 3.6): inside `heartbeat()`, whenever nothing was sent for `heartbeat_s`, a progress
notification says what the call is waiting on (`waiting for the model (23 s)`), so that hosts whose
idle timer resets on progress keep the call alive. Once the turn has started it is a full `status`
event with phase `heartbeat`; before that (queued behind another turn, mounts starting) progress only.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from pydantic import ConfigDict

from agent_server.events import AgentEvent, EventIds, StatusEvent, TokenEvent
from agent_server.types import one_line

HEARTBEAT_PHASE = "heartbeat"

EVENTS_EXTENSION = "dev.agent-server/events"
EVENT_METHOD = "notifications/agent_server/event"


class AgentEventParams(types.NotificationParams):
    """The params of an event notification: the event object itself (see schemas/event.json)."""

    model_config = ConfigDict(extra="allow")


class AgentEventNotification(types.Notification[AgentEventParams, Literal["notifications/agent_server/event"]]):
    method: Literal["notifications/agent_server/event"] = "notifications/agent_server/event"
    params: AgentEventParams


def wants_full_events(ctx: ServerRequestContext[Any, Any]) -> bool:
    caps = ctx.session.client_capabilities
    return bool(caps and caps.extensions and EVENTS_EXTENSION in caps.extensions)


class EventStreamer:
    """An `EventSink` bound to one request."""

    def __init__(
        self, ctx: ServerRequestContext[Any, Any], *, flush_interval: float, heartbeat_s: float | None = None
    ) -> None:
        self._ctx = ctx
        self._full = wants_full_events(ctx)
        self._flush_interval = flush_interval
        self._heartbeat_s = heartbeat_s
        self._progress = 0
        self._pending: TokenEvent | None = None
        self._last_flush = -math.inf  # never flushed: the first delta goes at once, whatever the clock reads
        # Sends come from the call and from the heartbeat task: one at a time keeps `progress` increasing.
        self._send_lock = anyio.Lock(fast_acquire=True)
        self._last_sent = anyio.current_time()
        self._waits = _Waits()

    def waiting_on(self, what: str) -> None:
        """What the call waits on before its turn emits events (e.g. an earlier turn of the session)."""
        self._waits.begin(what)

    async def __call__(self, event: AgentEvent) -> None:
        self._waits.observe(event)
        if isinstance(event, TokenEvent):
            self._pending = _merge(self._pending, event)
            if time.monotonic() - self._last_flush >= self._flush_interval:
                await self.flush()
            return
        await self.flush()
        await self._send(event)

    @asynccontextmanager
    async def heartbeat(self) -> AsyncGenerator[None]:
        """Send heartbeats while the block runs (none when `heartbeat_s` is None)."""
        if self._heartbeat_s is None:
            yield
            return
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._beat, self._heartbeat_s)
                try:
                    yield
                finally:
                    tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The task group wraps what the block raised; callers handle the error itself.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from group.exceptions[0].__cause__
            raise

    async def _beat(self, interval: float) -> None:
        while True:
            await anyio.sleep_until(self._last_sent + interval)
            if anyio.current_time() - self._last_sent < interval:
                continue  # something else was sent meanwhile
            if self._pending is not None:
                await self.flush()
                continue
            message = self._waits.describe()
            ids = self._waits.ids
            if ids is None:
                async with self._send_lock:
                    await self._report(message)
            else:
                await self._send(StatusEvent(phase=HEARTBEAT_PHASE, message=message, **ids))

    async def flush(self) -> None:
        """Send buffered token text, if any."""
        pending, self._pending = self._pending, None
        self._last_flush = time.monotonic()
        if pending is not None:
            await self._send(pending)

    async def _send(self, event: AgentEvent) -> None:
        async with self._send_lock:
            await self._report(describe(event))
            if self._full:
                params = AgentEventParams.model_validate(event.model_dump(mode="json", by_alias=True))
                notification: Any = AgentEventNotification(params=params)
                await self._ctx.session.send_notification(notification, related_request_id=_request_id(self._ctx))

    async def _report(self, message: str) -> None:
        self._progress += 1
        self._last_sent = anyio.current_time()
        await self._ctx.session.report_progress(self._progress, None, message)


class _Waits:
    """What a call is waiting on right now, told by the events that pass through, and since when."""

    def __init__(self) -> None:
        self.ids: EventIds | None = None
        self._what = "the call to start"
        self._since = anyio.current_time()
        self._tools: dict[str, str] = {}

    def begin(self, what: str) -> None:
        self._what, self._since = what, anyio.current_time()

    def observe(self, event: AgentEvent) -> None:
        match event.type:
            case "turn":
                self.ids = {"turn_id": event.turn_id, "session_id": event.session_id, "trace_id": event.trace_id}
            case "status" if event.phase != HEARTBEAT_PHASE:
                self.begin(_PHASE_WAITS.get(event.phase, event.phase))
            case "tool_start":
                self._tools[event.call.id] = event.call.name
                self.begin(self._tool_wait())
            case "tool_running":  # past its approval, if it was asked
                self.begin(self._tool_wait())
            case "tool_result":
                self._tools.pop(event.result.call_id, None)
                if self._tools:
                    self.begin(self._tool_wait())
            case _:
                pass

    def _tool_wait(self) -> str:
        names = sorted(set(self._tools.values()))
        return f"tool {names[0]}" if len(names) == 1 else f"{len(self._tools)} tool calls ({', '.join(names)})"

    def describe(self) -> str:
        return f"waiting for {self._what} ({anyio.current_time() - self._since:.0f} s)"


_PHASE_WAITS = {
    "sampling": "the model",
    "executing_tools": "the tool calls",
    "compact": "the compaction summary",
}


def _request_id(ctx: ServerRequestContext[Any, Any]) -> str | None:
    return None if ctx.request_id is None else str(ctx.request_id)


def _merge(pending: TokenEvent | None, event: TokenEvent) -> TokenEvent:
    if pending is None:
        return event
    return pending.model_copy(update={"delta": pending.delta + event.delta})


def describe(event: AgentEvent) -> str:  # noqa: C901 - one arm per event kind
    """A one-line human summary of an event, for progress messages."""
    match event.type:
        case "turn":
            return f"turn {event.turn_id} started"
        case "status":
            return event.message
        case "prompt_trace":
            tokens = sum(p.tokens for p in event.parts) + event.history_tokens + event.tool_schema_tokens
            return f"prompt: {len(event.parts)} part(s), ~{tokens} tokens"
        case "token":
            return one_line(f"text: {event.delta}")
        case "tool_start":
            return f"{event.call.name}: started"
        case "tool_running":
            return f"{event.name}: running"
        case "tool_progress":
            detail = event.message or (f"{event.progress:g}/{event.total:g}" if event.total else f"{event.progress:g}")
            return one_line(f"{event.name}: {detail}")
        case "tool_result":
            outcome = "error" if event.result.is_error else "ok"
            return f"{event.result.name}: {outcome} in {event.result.duration_s:.2f}s"
        case "compaction":
            r = event.record
            tokens = f"~{r.estimated_tokens_before} -> ~{r.estimated_tokens_after} tokens"
            return f"compacted {r.compacted_message_count} message(s) ({r.mode}), {tokens}"
        case "error":
            return one_line(f"error: {event.message}")
        case "done":
            return f"done: {event.status}"
