"""Putting the page on the air: its login (links printed on stderr, or bearer tokens), mounted at `view.path`.

`page(...)` is what both front doors use: `agent-server view` (`standalone_app`, the page alone, over a runtime
of its own on the same store) and the Streamable HTTP transport (the page beside `/mcp`, over the server's own
runtime). Either way the terminal says where the page is: a one-time login link (no `auth`: a loopback bind),
or the page's URL and that it takes the server's bearer tokens (`auth`).
"""

from __future__ import annotations

import logging
import sys

from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route

from agent_server.settings import Settings
from agent_server.view.app import RuntimeOf, view_app
from agent_server.view.auth import BearerVerifier, PageAuth, page_key

logger = logging.getLogger(__name__)


def page(
    runtime_of: RuntimeOf,
    settings: Settings,
    *,
    url: str,
    security: TransportSecuritySettings,
    verify: BearerVerifier | None,
) -> Mount:
    """The page, mounted at `settings.view.path`, reached at `url` (its address, ending in `/`): with `verify`
    (the HTTP transport's bearer tokens) when `auth` is set, else with login links, announced on stderr now."""
    keys = [key.get_secret_value() for key in settings.request_state_keys]
    auth = PageAuth(page_key(keys), verify=verify)
    if auth.uses_links:
        auth.on_spent = lambda: announce(f"a login link was used; another, for another browser: {link(auth, url)}")
        announce(f"the web view (approvals, sessions, live turns): {link(auth, url)}")
    else:
        announce(f"the web view (approvals, sessions, live turns): {url} (log in with a bearer token of auth)")
    return Mount(settings.view.path, app=view_app(runtime_of, auth=auth, security=security))


def link(auth: PageAuth, url: str) -> str:
    return f"{url}?token={auth.new_link_token()}"


def announce(line: str) -> None:
    """A line for the user on stderr, whatever the log level (as Jupyter prints its URL)."""
    sys.stderr.write(f"agent-server: {line}\n")
    sys.stderr.flush()


def standalone_app(mounted: Mount) -> Starlette:
    """`agent-server view`'s app: the page, and `/` sending a browser to it (the caller holds the runtime open)."""
    path = mounted.path

    async def home(_request: Request) -> Response:
        return RedirectResponse(f"{path}/", status_code=307)

    return Starlette(routes=[Route("/", home), mounted])
