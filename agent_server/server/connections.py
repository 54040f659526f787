"""Each connection's current session (DESIGN 3.5): held in memory, never shared through the store.

A connection is one client: on stdio (and in-memory) the server process serves exactly one; on
Streamable HTTP in the handshake era it is one MCP session (`Mcp-Session-Id`). A 2026-07-28 HTTP
request carries no connection identity, so it has no current session: a call without `session_id`
starts a new one, and the result's `session_id` is how to continue.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp.server import ServerRequestContext

ConnectionKey = str
PROCESS: ConnectionKey = "process"
MAX_CONNECTIONS = 1024
"""Current sessions remembered for HTTP connections; the least recently used one is forgotten first."""


def connection_key(ctx: ServerRequestContext[Any, Any]) -> ConnectionKey | None:
    """The connection a request belongs to, or None when the request has no connection identity."""
    request: Any = ctx.request
    if request is None:
        return PROCESS
    session_id = request.headers.get("mcp-session-id")
    return f"http:{session_id}" if isinstance(session_id, str) and session_id else None


class CurrentSessions:
    """Connection -> its current session id, bounded (`MAX_CONNECTIONS`)."""

    def __init__(self, limit: int = MAX_CONNECTIONS) -> None:
        self._limit = limit
        self._current: OrderedDict[ConnectionKey, str] = OrderedDict()
        self._creating = anyio.Lock()

    def get(self, key: ConnectionKey | None) -> str | None:
        if key is None or key not in self._current:
            return None
        self._current.move_to_end(key)
        return self._current[key]

    def set(self, key: ConnectionKey | None, session_id: str) -> None:
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
        self, key: ConnectionKey, exists: Callable[[str], Awaitable[bool]], create: Callable[[], Awaitable[str]]
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
