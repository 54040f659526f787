"""Each connection's current session (DESIGN 3.5): held in memory, never shared through the store.

What a connection is, is the front door's business (see `agent_server.runtime`); here it is a key, with the
principal it belongs to: `(principal, connection)`, so that two principals' connections never share one.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable

import anyio

CurrentKey = tuple[str, str]
"""`(principal, connection)`."""
MAX_CONNECTIONS = 1024
"""Current sessions remembered; the least recently used connection's is forgotten first."""


class CurrentSessions:
    """Connection -> its current session id, bounded (`MAX_CONNECTIONS`)."""

    def __init__(self, limit: int = MAX_CONNECTIONS) -> None:
        self._limit = limit
        self._current: OrderedDict[CurrentKey, str] = OrderedDict()
        self._creating = anyio.Lock()

    def get(self, key: CurrentKey | None) -> str | None:
        if key is None or key not in self._current:
            return None
        self._current.move_to_end(key)
        return self._current[key]

    def set(self, key: CurrentKey | None, session_id: str) -> None:
        if key is None:
            return
        self._current[key] = session_id
        self._current.move_to_end(key)
        while len(self._current) > self._limit:
            self._current.popitem(last=False)

    def forget(self, session_id: str) -> None:
        """A deleted session is nobody's current session any more."""
        for key in [k for k, v in self._current.items() if v == session_id]:
            del self._current[key]

    async def get_or_create(
        self, key: CurrentKey, exists: Callable[[str], Awaitable[bool]], create: Callable[[], Awaitable[str]]
    ) -> str:
        """The connection's current session if it still exists, else a new one made current.

        Concurrent first calls of one connection get the same new session (one is created).
        """
        async with self._creating:
            current = self.get(key)
            if current is None or not await exists(current):
                current = await create()
                self.set(key, current)
            return current
