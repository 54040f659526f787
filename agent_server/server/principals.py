"""Whom an MCP request is made for (DESIGN 3.10): its principal, and the runtime acting for it.

Over Streamable HTTP with `auth` set, the SDK's bearer middleware has verified the request's token before
anything else of the request was read, and put the `AccessToken` on it (`AuthenticatedUser`, `scope["user"]`).
The token's principal is its `subject` (a JWT's `sub`, a static token's name), else its `client_id`. A
program that serves the app in-process behind its own authentication sets the SDK's `auth_context_var`, read
the same way. Everything else (stdio, an unauthenticated loopback bind, in-memory clients) is `local`.

Every handler reaches the runtime through `caller_runtime`: the one place the front door decides the principal.
"""

from __future__ import annotations

from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken

from agent_server.runtime import AgentRuntime
from agent_server.types import LOCAL_PRINCIPAL


def token_principal(token: AccessToken) -> str:
    """The principal a verified token stands for."""
    return token.subject or token.client_id


def principal_of(ctx: ServerRequestContext[Any, Any]) -> str:
    """The principal of the request `ctx` serves (see the module docstring)."""
    request: Any = ctx.request
    user = request.scope.get("user") if request is not None else None
    token = user.access_token if isinstance(user, AuthenticatedUser) else get_access_token()
    return LOCAL_PRINCIPAL if token is None else token_principal(token)


def caller_runtime(ctx: ServerRequestContext[AgentRuntime, Any]) -> AgentRuntime:
    """The server's runtime, acting for the request's principal."""
    return ctx.lifespan_context.as_principal(principal_of(ctx))
