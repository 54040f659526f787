"""Loop events -> MCP notifications for the request that runs the turn.

Every event becomes a `notifications/progress` on the caller's progress token (a no-op when
the caller sent none), with a strictly increasing `progress` and a one-line `message`. Clients
that advertise the `EVENTS_EXTENSION` client extension also get every event in full as a
`notifications/agent_server/event`. Token deltas are coalesced by `doors.stream` (every door's rule): buffered
and sent as one event at most every `flush_interval` seconds, and always before the next event.

Heartbeat (DESIGN 3.6): inside `heartbeat()`, whenever nothing was sent for `heartbeat_s`, a progress
notification says what the call is waiting on (`waiting for the model (23 s)`), so that hosts whose
idle timer resets on progress keep the call alive. Once the turn has started it is a full `status`
event with phase `heartbeat`; before that (queued behind another turn, mounts starting) progress only.
"""

import logging
from collections.abc import AsyncGenerator, Generator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from pydantic import ConfigDict

from agent_server.doors.stream import EventStream
from agent_server.events import AgentEvent, EventIds, StatusEvent, TokenEvent

logger = logging.getLogger(__name__)

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


_OVER_STDIO: ContextVar[bool] = ContextVar("agent_server_mcp_over_stdio", default=False)


@contextmanager
def serving_stdio() -> Generator[None]:
    """Mark the requests served inside the block (tasks started in it) as arriving over stdio."""
    token = _OVER_STDIO.set(True)
    try:
        yield
    finally:
        _OVER_STDIO.reset(token)


def progress_reaches_caller(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether a progress notification for this request can reach its caller. Over a wire (stdio, HTTP) only a
    request that carries a progress token gets any (the SDK drops the rest); an in-process client's progress
    callback is not in the request (the SDK's direct dispatcher holds it), so in process the answer is yes."""
    over_a_wire = ctx.request is not None or _OVER_STDIO.get()
    return not over_a_wire or progress_token_from_params(ctx.params) is not None


class _EveryEvent:
    """`doors.stream.Shows` for MCP: every event is sent as it is (coalesced text as one token event)."""

    def event(self, event: AgentEvent) -> AgentEvent:
        return event

    def text(self, token: TokenEvent) -> AgentEvent:
        return token

    def unfinished(self, call_id: str, status: str) -> None:
        return None  # the `done` event says how the turn ended; its record has every call


class EventStreamer:
    """An `EventSink` bound to one request."""

    def __init__(
        self, ctx: ServerRequestContext[Any, Any], *, flush_interval: float, heartbeat_s: float | None = None
    ) -> None:
        self._ctx = ctx
        self._full = wants_full_events(ctx)
        self._listens = self._full or progress_reaches_caller(ctx)
        if not self._listens:
            logger.debug("request %s has no progress token: its turn builds and sends no events", ctx.request_id)
        self._heartbeat_s = heartbeat_s
        self._progress = 0
        self._stream = EventStream(_EveryEvent(), self._send, flush_interval=flush_interval)
        # Sends come from the call and from the heartbeat task: one at a time keeps `progress` increasing.
        self._send_lock = anyio.Lock(fast_acquire=True)
        self._last_sent = anyio.current_time()
        self._waits = _Waits()

    def listening(self) -> bool:
        """Whether the events sent here reach the caller (`events.listening`): a call over a wire without a
        progress token and without the full-events extension gets none, so its turn builds none."""
        return self._listens

    def waiting_on(self, what: str) -> None:
        """What the call waits on before its turn emits events (e.g. an earlier turn of the session)."""
        self._waits.begin(what)

    async def __call__(self, event: AgentEvent) -> None:
        if not self._listens:
            return
        self._waits.observe(event)
        await self._stream(event)

    @asynccontextmanager
    async def heartbeat(self) -> AsyncGenerator[None]:
        """Send heartbeats while the block runs (none when `heartbeat_s` is None or nobody listens)."""
        if self._heartbeat_s is None or not self._listens:
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
            if self._stream.buffered:
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
        await self._stream.flush()

    async def _send(self, event: AgentEvent) -> None:
        from agent_server.doors.show import describe  # here: a turn whose caller asked for no progress needs none

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
