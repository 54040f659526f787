"""The Streamable HTTP door (DESIGN 3.10): the SDK's transport behind its OAuth resource-server pieces.

- Host/Origin checks (the SDK's DNS-rebinding protection, `TransportSecuritySettings`): on a loopback bind
  every loopback spelling of the host is allowed; elsewhere `http.allowed_hosts` / `http.allowed_origins`
  (and the bind address itself when it is a specific one).
- With `auth` set, on every bind, loopback included: the SDK's `BearerAuthBackend` over our `TokenVerifier`
  (`tokens.py`) and its `RequireAuthMiddleware` in front of `/mcp`, so a request without a valid token is
  answered 401 with `WWW-Authenticate: Bearer ..., resource_metadata="<url>"` before anything else of it
  is read (no body, no MCP session, no Host check). The protected resource metadata (RFC 9728) is served at
  `/.well-known/oauth-protected-resource<path of the resource URL>`: with `auth.jwt`, the SDK's document
  naming the issuer as the authorization server; with static tokens only, one without
  `authorization_servers` (RFC 9728 lets it be absent: such tokens come from the server's operator, not
  from an OAuth authorization server, and there is none to name).
- `check_bind` refuses, before anything starts, a bind the settings cannot protect.
- With `view.enabled`, the web view (`agent_server.view`) at `view.path` beside `/mcp`, over the server's own
  runtime, behind the same Host/Origin checks and (with `auth`) the same bearer tokens, given by the page's login
  form and kept in its cookie; without `auth`, a login link printed on stderr.
"""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mcp.server import Server
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware, create_protected_resource_routes
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl, ConfigDict, TypeAdapter
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from agent_server.errors import ConfigError
from agent_server.http_settings import AuthSettings, HttpSettings
from agent_server.server.http_sessions import SessionManager, session_cap
from agent_server.settings import Settings

if TYPE_CHECKING:
    from agent_server.runtime import AgentRuntime

MCP_PATH = "/mcp"
RESOURCE_NAME = "agent-server"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
_URL = TypeAdapter(AnyHttpUrl, config=ConfigDict(url_preserve_empty_path=True))
"""URLs as written: an issuer compares exactly (RFC 8414), so `https://id.example` must not gain a `/`."""


def _url(text: str) -> AnyHttpUrl:
    return _URL.validate_python(text)


def http_app(server: Server[Any], settings: Settings, *, host: str, port: int) -> ASGIApp:
    """The ASGI app serving `server` at `/mcp` on `host:port`, as the settings protect it (module docstring)."""
    from agent_server.server.listing import input_schema

    server.get_tool_input_schema = input_schema
    security = transport_security(host, settings.http)
    view = _view(server, settings, host, port, security) if settings.view.enabled else None
    manager = SessionManager(server, security_settings=security, idle_timeout_s=settings.http.session_idle_timeout_s)
    mcp = session_cap(manager, settings.limits.mcp_sessions)
    if settings.auth is None:
        rest = Starlette(
            routes=[Route(MCP_PATH, endpoint=mcp), *([] if view is None else [view])], lifespan=_runs(manager)
        )
        return _front(mcp, rest)
    return _authenticated(mcp, manager, settings.auth, resource_url(settings.auth, host, port), view)


def _runs(manager: SessionManager) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    return lambda _app: manager.run()


def _front(mcp: ASGIApp, rest: ASGIApp) -> ASGIApp:
    """`/mcp` straight to its app; everything else (the lifespan, metadata, the view) through Starlette's router.

    Every request and every event a turn streams would otherwise pass Starlette's error and exception
    middlewares and its router, which add nothing there: an error inside is answered 500 by uvicorn as by them.
    """

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == MCP_PATH:
            await mcp(scope, receive, send)
        else:
            await rest(scope, receive, send)

    return app


def _view(server: Server[Any], settings: Settings, host: str, port: int, security: TransportSecuritySettings) -> Mount:
    """The web view over the runtime the server's lifespan opens (held while it is open)."""
    from agent_server.view.serve import page

    url = f"http://{host_header_name(host)}:{port}{settings.view.path}/"
    held: list[AgentRuntime] = []
    opened = server.lifespan

    @asynccontextmanager
    async def holding(app: Server[Any]) -> AsyncGenerator[Any]:
        async with opened(app) as runtime:
            held.append(runtime)
            runtime.serve_view_at(url)
            try:
                yield runtime
            finally:
                held.remove(runtime)

    def runtime_of() -> AgentRuntime:
        if not held:
            raise RuntimeError("the server's lifespan is not open")
        return held[-1]

    server.lifespan = holding
    verify = None if settings.auth is None else bearer_verifier(settings.auth)
    return page(runtime_of, settings, url=url, security=security, verify=verify)


def bearer_verifier(auth: AuthSettings) -> Callable[[str], Awaitable[str | None]]:
    """A bearer token -> its principal (as `/mcp` decides it), or None: what the web view's login checks."""
    from agent_server.server.principals import token_principal
    from agent_server.server.tokens import verifier

    tokens = verifier(auth)

    async def verify(token: str) -> str | None:
        access = await tokens.verify_token(token)
        return None if access is None else token_principal(access)

    return verify


def _authenticated(
    mcp: ASGIApp, manager: SessionManager, auth: AuthSettings, resource: str, view: Mount | None
) -> ASGIApp:
    from agent_server.server.tokens import verifier

    metadata_url = build_resource_metadata_url(_url(resource))
    backend = BearerAuthBackend(verifier(auth))
    protected = RequireAuthMiddleware(mcp, [], metadata_url)
    routes = [
        Route(MCP_PATH, endpoint=protected),
        *_metadata_routes(auth, resource),
        *([] if view is None else [view]),
    ]
    middleware = [Middleware(AuthenticationMiddleware, backend=backend), Middleware(AuthContextMiddleware)]
    rest = Starlette(routes=routes, middleware=middleware, lifespan=_runs(manager))
    return _front(AuthenticationMiddleware(AuthContextMiddleware(protected), backend=backend), rest)


def _metadata_routes(auth: AuthSettings, resource: str) -> list[Route]:
    if auth.jwt is not None:
        return create_protected_resource_routes(
            resource_url=_url(resource),
            authorization_servers=[_url(auth.jwt.issuer)],
            resource_name=RESOURCE_NAME,
        )
    document = {"resource": resource, "bearer_methods_supported": ["header"], "resource_name": RESOURCE_NAME}

    async def metadata(_request: Request) -> Response:
        return JSONResponse(document, headers={"Cache-Control": "public, max-age=3600"})

    path = urlsplit(str(build_resource_metadata_url(_url(resource)))).path
    return [Route(path, endpoint=cors_middleware(metadata, ["GET", "OPTIONS"]), methods=["GET", "OPTIONS"])]


def resource_url(auth: AuthSettings, host: str, port: int) -> str:
    """This server's resource URL: `auth.resource_url`, else `auth.jwt.audience`, else the bind's own."""
    if auth.resource_url is not None:
        return auth.resource_url
    if auth.jwt is not None:
        return auth.jwt.audience
    return f"http://{host_header_name(host)}:{port}{MCP_PATH}"


def check_bind(settings: Settings, host: str) -> None:
    """Refuse a non-loopback bind without `auth`, and a wildcard one without `http.allowed_hosts`.

    Raises:
        ConfigError: naming the setting that is missing.
    """
    if is_loopback(host):
        return
    if settings.auth is None:
        raise ConfigError(
            f"refusing to serve Streamable HTTP on {host}, which is not a loopback address, without authentication:"
            " set auth.tokens (or auth.tokens_file, or auth.jwt) in the config file (see the README's security"
            " section), or bind a loopback address (--host 127.0.0.1)"
        )
    if _is_wildcard(host) and not settings.http.allowed_hosts:
        raise ConfigError(
            f"refusing to serve Streamable HTTP on {host or 'every address'} without http.allowed_hosts: list the"
            ' Host header values clients reach this server by (e.g. ["agents.example.com", "10.0.0.5:*"])'
        )


def transport_security(host: str, http: HttpSettings) -> TransportSecuritySettings:
    """The SDK's Host/Origin checks for a server bound to `host` (see the module docstring).

    Passed to the SDK explicitly: left to itself it protects only three spellings of loopback
    (`127.0.0.1`, `localhost`, `::1`), serves any other loopback address unprotected, and checks nothing
    on other binds.
    """
    if is_loopback(host):
        names = {*LOOPBACK_NAMES, host_header_name(host)}
        hosts = [f"{name}:*" for name in sorted(names)]
        origins = [f"http://{name}:*" for name in sorted(names)]
    else:
        own = [] if _is_wildcard(host) else [host_header_name(host), f"{host_header_name(host)}:*"]
        hosts, origins = own, []
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*hosts, *http.allowed_hosts],
        allowed_origins=[*origins, *http.allowed_origins],
    )


def is_loopback(host: str) -> bool:
    """True for `localhost` and every loopback address (all of 127.0.0.0/8, ::1), decided by address."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _is_wildcard(host: str) -> bool:
    """`0.0.0.0`, `::` (or no host at all): every address of the machine."""
    try:
        return not host or ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def host_header_name(host: str) -> str:
    """How `host` appears in a Host header: IPv6 addresses in brackets."""
    bare = host.strip("[]")
    return f"[{bare}]" if ":" in bare else bare.lower()
