"""Handshake-era MCP sessions over Streamable HTTP, at most `limits.mcp_sessions` open per principal.

The SDK's session manager bounds the sessions of all callers together (`max_sessions`, 10,000): one principal
could open them all and lock every other out. Here each principal has room of its own, as for the other limits
(DESIGN 3.10):

- `SessionManager` is the SDK's manager, told which principal opens each session (from the request, as the rest
  of the door decides it) and keeping the count: a session counts from when the manager registers it until it
  forgets it, however it ends (`DELETE`, the idle timeout, a failed opening, a crash);
- `session_cap` answers a request that would open one more while the principal's sessions (and the openings in
  flight) are at the limit: HTTP 429 with a JSON-RPC error naming the setting, before anything of it is read.
  An opening stops counting as one in flight the moment its session is registered (and counts as open), not
  when its request's handler returns: the client may have its answer, and open the next, before that.

Requests of an open session, and 2026-07-28 requests (which open none), pass unchanged.
"""

from __future__ import annotations

from collections import Counter
from contextvars import ContextVar
from typing import Any

from mcp.server import Server
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, AuthorizationContext
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import INVALID_REQUEST
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from agent_server.server.principals import token_principal
from agent_server.types import LOCAL_PRINCIPAL

SETTING = "limits.mcp_sessions"
_SESSION_HEADER = MCP_SESSION_ID_HEADER.encode("ascii")
_VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.encode("ascii")


class _Opening:
    """A request that may open a session, in flight until its session is registered (or the request ends)."""

    def __init__(self, principal: str) -> None:
        self.principal = principal
        self.in_flight = True


_opening: ContextVar[_Opening | None] = ContextVar("opening", default=None)
"""The request being served, for `SessionManager._admit_session` (called in its task)."""


class SessionManager(StreamableHTTPSessionManager):
    """The SDK's manager, counting each principal's open sessions (see the module docstring)."""

    def __init__(
        self, app: Server[Any], *, security_settings: TransportSecuritySettings, idle_timeout_s: float
    ) -> None:
        super().__init__(app, security_settings=security_settings, session_idle_timeout=idle_timeout_s)
        self.open_sessions: Counter[str] = Counter()
        self.openings: Counter[str] = Counter()
        """Each principal's requests in flight that may open a session (`session_cap`)."""
        self._owners: dict[str, str] = {}

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        transport = super()._admit_session(requestor)
        if transport is not None and transport.mcp_session_id is not None:
            opening = _opening.get()
            principal = LOCAL_PRINCIPAL if opening is None else opening.principal
            self._owners[transport.mcp_session_id] = principal
            self.open_sessions[principal] += 1
            if opening is not None:
                self.landed(opening)
        return transport

    def landed(self, opening: _Opening) -> None:
        """`opening` is in flight no more (its session is open, or its request ended without one)."""
        if opening.in_flight:
            opening.in_flight = False
            self.openings[opening.principal] -= 1
            if not self.openings[opening.principal]:
                del self.openings[opening.principal]

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        principal = self._owners.pop(session_id, None)  # called again for a session already gone: no-op
        if principal is not None:
            self.open_sessions[principal] -= 1
            if not self.open_sessions[principal]:
                del self.open_sessions[principal]
        await super()._discard_session(session_id, transport)


def session_cap(manager: SessionManager, limit: int) -> ASGIApp:
    """`manager`'s ASGI app, refusing a principal's session past `limit` (see the module docstring)."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if not _opens_session(scope):
            await manager.handle_request(scope, receive, send)
            return
        principal = _principal(scope)
        held = manager.open_sessions[principal] + manager.openings[principal]
        if held >= limit:  # counted and checked with no await between: concurrent openings see each other
            await _refusal(held, limit)(scope, receive, send)
            return
        opening = _Opening(principal)
        manager.openings[principal] += 1
        token = _opening.set(opening)
        try:
            await manager.handle_request(scope, receive, send)
        finally:
            _opening.reset(token)
            manager.landed(opening)

    return app


def _principal(scope: Scope) -> str:
    user = scope.get("user")
    return token_principal(user.access_token) if isinstance(user, AuthenticatedUser) else LOCAL_PRINCIPAL


def _opens_session(scope: Scope) -> bool:
    """A handshake-era request without a session id: the SDK opens a session for it."""
    if scope["type"] != "http":
        return False
    headers: list[tuple[bytes, bytes]] = scope["headers"]
    version = next((value.decode("latin-1") for key, value in headers if key == _VERSION_HEADER), None)
    if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return False
    return all(key != _SESSION_HEADER for key, _ in headers)


def _refusal(held: int, limit: int) -> JSONResponse:
    message = (
        f"too many open MCP sessions: this principal has {held} open, the limit ({SETTING}) is {limit}; end one"
        f" (DELETE /mcp with its {MCP_SESSION_ID_HEADER}) or let one idle out, or ask the operator to raise {SETTING}"
    )
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": message}}
    return JSONResponse(body, status_code=429)
