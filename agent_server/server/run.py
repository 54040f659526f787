"""Serving the MCP server over a transport: stdio (default) or Streamable HTTP."""

from __future__ import annotations

import ipaddress
import logging
import os
import signal
import threading
from collections.abc import AsyncGenerator, Callable
from contextlib import AbstractAsyncContextManager, ExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

import anyio

from agent_server.settings import Settings

if TYPE_CHECKING:
    from mcp.server import Server
    from mcp.server.transport_security import TransportSecuritySettings

logger = logging.getLogger(__name__)

SHUTDOWN_LIMIT_S = 5.0
"""After a signal, the longest the orderly shutdown may take before the process leaves anyway."""

Lifespan = Callable[[Any], AbstractAsyncContextManager[Any]]


async def serve_stdio(settings: Settings) -> None:
    """Serve over stdin/stdout until stdin closes or SIGTERM/SIGINT arrives.

    Either way the lifespan unwinds: running turns are recorded `cancelled`, every mounted
    server (its whole process group) is stopped, and the store is closed.

    Raises:
        ConfigError: the settings name a provider or script that cannot be loaded.
    """
    from agent_server.server.app import create_server

    server = create_server(settings)
    unwound = threading.Event()
    server.lifespan = _signalling(server.lifespan, unwound)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_cancel_on_signal, tg.cancel_scope, unwound)
        async with _stdio() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        tg.cancel_scope.cancel()


@asynccontextmanager
async def _stdio() -> AsyncGenerator[Any]:
    """The SDK's stdio transport, with the event-loop stdin reader and stdout writer where each is safe
    (see server/stdin.py and server/stdout.py); the SDK's own thread-backed file for the other."""
    from mcp.server.stdio import stdio_server

    from agent_server.server.stdin import can_claim_stdin, claim_stdin
    from agent_server.server.stdout import can_claim_stdout, claim_stdout

    with ExitStack() as claims:
        stdin = claims.enter_context(claim_stdin()) if can_claim_stdin() else None
        on_closed = stdin.end if stdin is not None else None  # a client gone from stdout ends the input too
        stdout = claims.enter_context(claim_stdout(on_closed=on_closed)) if can_claim_stdout() else None
        async with stdio_server(
            stdin=cast("anyio.AsyncFile[str] | None", stdin), stdout=cast("anyio.AsyncFile[str] | None", stdout)
        ) as streams:
            yield streams


def _signalling(lifespan: Lifespan, unwound: threading.Event) -> Lifespan:
    @asynccontextmanager
    async def wrapped(server: Server[Any]) -> AsyncGenerator[Any]:
        try:
            async with lifespan(server) as state:
                yield state
        finally:
            unwound.set()

    return wrapped


async def _cancel_on_signal(scope: anyio.CancelScope, unwound: threading.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            logger.info("received %s: shutting down", signal.Signals(signum).name)
            scope.cancel()
            # The SDK reads stdin in a worker thread that only returns on input or EOF, so after a
            # signal the process could hang on it. Once the lifespan has unwound (turns recorded,
            # mounts stopped, store closed) nothing is left to do: leave without waiting for it.
            threading.Thread(target=_exit_when, args=(unwound,), daemon=True).start()
            return


def _exit_when(unwound: threading.Event) -> None:
    unwound.wait(SHUTDOWN_LIMIT_S)
    logging.shutdown()
    os._exit(0)


async def serve_http(settings: Settings, *, host: str, port: int) -> None:
    """Serve Streamable HTTP at `http://HOST:PORT/mcp` until interrupted.

    On a loopback host (`localhost` or any loopback address) DNS-rebinding protection is on: the
    Host and Origin headers must name a loopback host. Binding elsewhere exposes the agent to the
    network: a warning is logged.

    Raises:
        ConfigError: the settings name a provider or script that cannot be loaded.
    """
    import uvicorn

    from agent_server.server.app import create_server

    security = rebinding_protection(host)
    if security is None:
        logger.warning("serving on %s: the agent is reachable from the network and has no authentication", host)
    server = create_server(settings)
    app = server.streamable_http_app(host=host, transport_security=security)
    config = uvicorn.Config(app, host=host, port=port, log_level=settings.log_level.lower(), lifespan="on")
    await uvicorn.Server(config).serve()


def is_loopback(host: str) -> bool:
    """True for `localhost` and every loopback address (all of 127.0.0.0/8, ::1), decided by address."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def rebinding_protection(host: str) -> TransportSecuritySettings | None:
    """DNS-rebinding protection for a server bound to `host`; None when `host` is not loopback.

    Passed to the SDK explicitly: left to itself it protects only three spellings of loopback
    (`127.0.0.1`, `localhost`, `::1`) and serves any other loopback address unprotected.
    """
    from mcp.server.transport_security import TransportSecuritySettings

    if not is_loopback(host):
        return None
    names = {"127.0.0.1", "localhost", "[::1]", _host_header_name(host)}
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=sorted(f"{name}:*" for name in names),
        allowed_origins=sorted(f"http://{name}:*" for name in names),
    )


def _host_header_name(host: str) -> str:
    """How `host` appears in a Host header: IPv6 addresses in brackets."""
    bare = host.strip("[]")
    return f"[{bare}]" if ":" in bare else bare.lower()
