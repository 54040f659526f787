"""Coalescing of a mounted call's progress notifications before they reach the outer caller.

The SDK calls `push` from the connection's receive loop for every `notifications/progress`, so it
must never block: it only overwrites the latest value (constant memory, however many arrive).
`run`, a task of the call, forwards the latest value at most once per `interval_s`; `flush` sends
what is left when the call ends, so the caller always sees the final value.
"""

from __future__ import annotations

import logging

import anyio

from agent_server.tools.base import ProgressCallback

logger = logging.getLogger(__name__)

_Value = tuple[float, float | None, str | None]


class ProgressRelay:
    def __init__(self, sink: ProgressCallback, interval_s: float = 0.1) -> None:
        self._sink = sink
        self._interval_s = interval_s
        self._latest: _Value | None = None
        self._pending = anyio.Event()
        self.received = 0
        self.forwarded = 0

    async def push(self, progress: float, total: float | None, message: str | None) -> None:
        """The SDK's progress callback: remember the value and return at once."""
        self.received += 1
        self._latest = (progress, total, message)
        self._pending.set()

    async def run(self) -> None:
        """Forward the latest value, then wait out the interval; until cancelled."""
        while True:
            await self._pending.wait()
            self._pending = anyio.Event()
            await self.flush()
            await anyio.sleep(self._interval_s)

    async def flush(self) -> None:
        """Forward the latest value not forwarded yet, if any."""
        if self._latest is None:
            return
        value, self._latest = self._latest, None
        self.forwarded += 1
        try:
            await self._sink(*value)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception:
            logger.exception("a progress callback raised; the value is dropped")
