"""A turn's events as a door sends them: the part every door shares (pydantic-ai's `UIEventStream` is the model).

`EventStream` is the `EventSink` of one call. A door gives it a `Shows`, the thin mapping from an event to
the door's own message (or to nothing), and a way to send those messages. The stream keeps one rule for
every door:

- model text is coalesced: token deltas are buffered and sent as one message at most every
  `flush_interval` seconds (the first at once), and always before the next message the door sends;
- it remembers the turn's id (from its first event: a cancelled turn's record can be read back) and the tool
  calls announced and not ended; `end` sends, for each call the turn left open (cancelled while it ran or
  waited for its approval, cut by the turn's timeout), what the door shows of an unfinished call.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from typing import Generic, Protocol, TypeVar

from agent_server.events import AgentEvent, TokenEvent

Out = TypeVar("Out")
Out_co = TypeVar("Out_co", covariant=True)


class Shows(Protocol[Out_co]):
    """What a door sends for each thing the stream passes on; None: nothing."""

    def event(self, event: AgentEvent) -> Out_co | None:
        """A non-token event."""
        ...

    def text(self, token: TokenEvent) -> Out_co:
        """Coalesced model text: one token event holding every delta since the last."""
        ...

    def unfinished(self, call_id: str, status: str) -> Out_co | None:
        """A call announced by `tool_start` that the turn, ended `status`, never ended."""
        ...


class EventStream(Generic[Out]):
    """See the module docstring."""

    def __init__(self, shows: Shows[Out], send: Callable[[Out], Awaitable[None]], *, flush_interval: float) -> None:
        self._shows = shows
        self._send = send
        self._flush_interval = flush_interval
        self._first: TokenEvent | None = None
        self._deltas: list[str] = []
        self._last_flush = -math.inf  # never flushed: the first delta goes at once, whatever the clock reads
        self._open: dict[str, None] = {}
        """The calls announced and not ended yet, in order."""
        self.turn_id: str | None = None

    @property
    def buffered(self) -> bool:
        """Whether model text waits to be sent."""
        return self._first is not None

    async def __call__(self, event: AgentEvent) -> None:
        self._observe(event)
        if isinstance(event, TokenEvent):
            self._first = self._first or event
            self._deltas.append(event.delta)
            if time.monotonic() - self._last_flush >= self._flush_interval:
                await self.flush()
            return
        message = self._shows.event(event)
        if message is not None:
            await self.flush()
            await self._send(message)

    async def flush(self) -> None:
        """Send the buffered text, if any, as one message."""
        first, deltas = self._first, self._deltas
        self._first, self._deltas = None, []
        self._last_flush = time.monotonic()
        if first is not None:
            await self._send(self._shows.text(first.model_copy(update={"delta": "".join(deltas)})))

    async def end(self, status: str) -> None:
        """The turn ended `status`: send the buffered text, and what the door shows of each call left open."""
        await self.flush()
        open_calls, self._open = list(self._open), {}
        for call_id in open_calls:
            message = self._shows.unfinished(call_id, status)
            if message is not None:
                await self._send(message)

    def _observe(self, event: AgentEvent) -> None:
        match event.type:
            case "turn":
                self.turn_id = event.turn_id
            case "tool_start":
                self._open[event.call.id] = None
            case "tool_result":
                self._open.pop(event.result.call_id, None)
            case _:
                pass
