"""`limits.mcp_sessions`: a principal's handshake-era sessions over HTTP, counted from the moment each is opened."""

from __future__ import annotations

import pytest
from mcp.server import Server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Message, Receive, Scope, Send

from agent_server.server.http_sessions import SessionManager, session_cap

pytestmark = pytest.mark.anyio

OPENING: Scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": []}
"""A request without a session id: the SDK opens a session for it."""


class Exchange:
    """What the app sent back for one request."""

    def __init__(self) -> None:
        self.status: int | None = None

    async def receive(self) -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]


async def test_a_session_counts_once_from_its_opening_even_before_its_request_returns() -> None:
    """A client has its answer (and may open the next session) before the opening request's handler returns:
    the session must not count twice meanwhile (once open, once opening)."""
    manager = SessionManager(Server("t"), security_settings=TransportSecuritySettings(), idle_timeout_s=60)
    capped = session_cap(manager, 2)
    statuses: list[int | None] = []

    async def answered_then_next(scope: Scope, receive: Receive, send: Send) -> None:
        manager._admit_session(None)  # pyright: ignore[reportPrivateUsage]  # what the SDK does for an opening
        if len(statuses) < 2:  # the answer is out; the client opens its next session before this returns
            nxt = Exchange()
            await capped(OPENING, nxt.receive, nxt.send)
            statuses.append(nxt.status or 200)

    manager.handle_request = answered_then_next  # type: ignore[method-assign]
    first = Exchange()
    await capped(OPENING, first.receive, first.send)
    assert statuses == [429, 200]  # the third refused, the second admitted while the first was still returning
    assert manager.open_sessions["local"] == 2 and not manager.openings
