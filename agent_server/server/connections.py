"""Which connection an MCP request belongs to (DESIGN 3.5), as a key for `AgentRuntime`.

On stdio (and in-memory) the server process serves exactly one client; on Streamable HTTP in the
handshake era a connection is one MCP session (`Mcp-Session-Id`). A 2026-07-28 HTTP request carries
no connection identity: None, so a call without `session_id` starts a new session, and the
result's `session_id` is how to continue.
"""

from __future__ import annotations

from typing import Any

from mcp.server import ServerRequestContext

PROCESS = "process"


def connection_key(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The connection a request belongs to, or None when the request has no connection identity."""
    request: Any = ctx.request
    if request is None:
        return PROCESS
    session_id = request.headers.get("mcp-session-id")
    return f"http:{session_id}" if isinstance(session_id, str) and session_id else None
