"""Per-session locks: turns (and compactions) on one session queue in order, others run freely."""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import anyio


class SessionLocks:
    """A lock per session id, created on demand and dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[anyio.Lock, int]] = {}

    def busy(self, session_id: str) -> bool:
        """Whether someone holds (or waits for) the session's lock: a turn arriving now would queue."""
        return session_id in self._locks

    @asynccontextmanager
    async def hold(self, session_id: str, *, deadline: float = math.inf) -> AsyncGenerator[bool]:
        """Hold the session's lock for the block; yields False (not holding it) when `deadline`
        (on anyio's clock) passed while waiting, so the caller can end its call as timed out."""
        # fast_acquire: a free lock is taken without a trip through the event loop (the common case: one
        # turn at a time per session); a waiter still yields and is cancellable.
        lock, users = self._locks.get(session_id) or (anyio.Lock(fast_acquire=True), 0)
        self._locks[session_id] = (lock, users + 1)
        try:
            acquired = False
            with anyio.CancelScope(deadline=deadline):
                await lock.acquire()
                acquired = True
            try:
                yield acquired
            finally:
                if acquired:
                    lock.release()
        finally:
            lock, users = self._locks[session_id]
            if users == 1:
                del self._locks[session_id]
            else:
                self._locks[session_id] = (lock, users - 1)
