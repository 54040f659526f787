"""Loop events -> MCP notifications for the request that runs the turn.

Every event becomes a `notifications/progress` on the caller's progress token (a no-op when
the caller sent none), with a strictly increasing `progress` and a one-line `message`. Clients
that advertise the `EVENTS_EXTENSION` client extension also get every event in full as a
`notifications/agent_server/event`. Token deltas are coalesced: they are buffered and sent as
one event at most every `flush_interval` seconds, and always before the next non-token event.
"""

from __future__ import annotations

import time
from typing import Any, Literal

import mcp_types as types
from mcp.server import ServerRequestContext
from pydantic import ConfigDict

from agent_server.events import AgentEvent, TokenEvent

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

    def __init__(self, ctx: ServerRequestContext[Any, Any], *, flush_interval: float) -> None:
        self._ctx = ctx
        self._full = wants_full_events(ctx)
        self._flush_interval = flush_interval
        self._progress = 0
        self._pending: TokenEvent | None = None
        self._last_flush = 0.0

    async def __call__(self, event: AgentEvent) -> None:
        if isinstance(event, TokenEvent):
            self._pending = _merge(self._pending, event)
            if time.monotonic() - self._last_flush >= self._flush_interval:
                await self.flush()
            return
        await self.flush()
        await self._send(event)

    async def flush(self) -> None:
        """Send buffered token text, if any."""
        pending, self._pending = self._pending, None
        self._last_flush = time.monotonic()
        if pending is not None:
            await self._send(pending)

    async def _send(self, event: AgentEvent) -> None:
        self._progress += 1
        await self._ctx.session.report_progress(self._progress, None, describe(event))
        if self._full:
            params = AgentEventParams.model_validate(event.model_dump(mode="json", by_alias=True))
            notification: Any = AgentEventNotification(params=params)
            await self._ctx.session.send_notification(notification, related_request_id=_request_id(self._ctx))


def _request_id(ctx: ServerRequestContext[Any, Any]) -> str | None:
    return None if ctx.request_id is None else str(ctx.request_id)


def _merge(pending: TokenEvent | None, event: TokenEvent) -> TokenEvent:
    if pending is None:
        return event
    return pending.model_copy(update={"delta": pending.delta + event.delta})


def _one_line(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


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
            return _one_line(f"text: {event.delta}")
        case "tool_start":
            return f"{event.call.name}: started"
        case "tool_progress":
            detail = event.message or (f"{event.progress:g}/{event.total:g}" if event.total else f"{event.progress:g}")
            return _one_line(f"{event.name}: {detail}")
        case "tool_result":
            outcome = "error" if event.result.is_error else "ok"
            return f"{event.result.name}: {outcome} in {event.result.duration_s:.2f}s"
        case "compaction":
            r = event.record
            tokens = f"~{r.estimated_tokens_before} -> ~{r.estimated_tokens_after} tokens"
            return f"compacted {r.compacted_message_count} message(s) ({r.mode}), {tokens}"
        case "error":
            return _one_line(f"error: {event.message}")
        case "done":
            return f"done: {event.status}"
