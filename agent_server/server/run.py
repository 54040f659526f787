"""Serving the MCP server over a transport: stdio (default) or Streamable HTTP."""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Self, cast

import anyio

from agent_server.doors.signals import cancel_on_signal
from agent_server.settings import Settings

if TYPE_CHECKING:
    from mcp.server import Server
    from mcp.shared.message import SessionMessage

    from agent_server.doors.stdio import WireWriter

Lifespan = Callable[[Any], AbstractAsyncContextManager[Any]]


async def serve_stdio(settings: Settings) -> None:
    """Serve over stdin/stdout until stdin closes or SIGTERM/SIGINT arrives.

    Either way the lifespan unwinds: running turns are recorded `cancelled`, every mounted
    server (its whole process group) is stopped, and the store is closed.

    Raises:
        ConfigError: the settings name a provider or script that cannot be loaded.
    """
    from agent_server.server.app import create_server
    from agent_server.server.streaming import serving_stdio

    server = create_server(settings)
    unwound = threading.Event()
    server.lifespan = _signalling(server.lifespan, unwound)
    async with anyio.create_task_group() as tg:
        tg.start_soon(cancel_on_signal, tg.cancel_scope, unwound)
        # Set before the SDK's stdin reader starts: a request's handler runs in the context its message came in.
        with serving_stdio():
            async with _stdio() as (read, write):
                await server.run(read, write, server.create_initialization_options())
        tg.cancel_scope.cancel()


@asynccontextmanager
async def _stdio() -> AsyncGenerator[Any]:
    """The SDK's stdio transport over the wire `doors.stdio` guards (bounded lines in, read and written on the
    event loop), with its write side replaced by `_WireMessages`."""
    from mcp.server.stdio import stdio_server

    from agent_server.doors.stdio import claim_stdio

    with claim_stdio() as (reader, writer):
        stdin, stdout = cast("anyio.AsyncFile[str]", reader), cast("anyio.AsyncFile[str]", writer)
        async with writer.batching(), stdio_server(stdin=stdin, stdout=stdout) as (read, sdk_write):
            await sdk_write.aclose()  # its writer task ends: nothing is sent through it
            yield read, _WireMessages(writer)


class _WireMessages:
    """The server's write stream over stdio: each message serialised as the SDK's own stdout writer does and
    handed to the wire's writer at once. The SDK's stream hands one message at a time to its writer task,
    a task switch and a system call for every progress notification (about a third of a one-call turn's CPU
    with a progress token, `bench/README.md`); batched, a turn's events of one moment are one write."""

    def __init__(self, writer: WireWriter) -> None:
        self._writer = writer
        self._closed = False

    async def send(self, item: SessionMessage, /) -> None:
        if self._closed:
            raise anyio.ClosedResourceError  # what the SDK's dispatcher expects of a closed transport
        await self._writer.write(item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n")

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _signalling(lifespan: Lifespan, unwound: threading.Event) -> Lifespan:
    @asynccontextmanager
    async def wrapped(server: Server[Any]) -> AsyncGenerator[Any]:
        try:
            async with lifespan(server) as state:
                yield state
        finally:
            unwound.set()

    return wrapped


async def serve_http(settings: Settings, *, host: str, port: int) -> None:
    """Serve Streamable HTTP at `http://HOST:PORT/mcp` until interrupted, protected as `http_app` says.

    A non-loopback bind needs `auth` (and, on every address, `http.allowed_hosts`): without it the server does
    not start. uvicorn runs with the `http` settings' bounds (`http_protocol`): a header deadline, the idle
    keep-alive timeout and a connection limit.

    Raises:
        ConfigError: the bind is not protected by the settings, or they name a provider or script that cannot
            be loaded.
    """
    import uvicorn

    from agent_server.server.app import create_server
    from agent_server.server.http_app import check_bind, http_app
    from agent_server.server.http_protocol import bounded_protocol

    check_bind(settings, host)
    server = create_server(settings)
    app = http_app(server, settings, host=host, port=port)
    http = settings.http
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=settings.log_level.lower(),
        lifespan="on",
        http=bounded_protocol(header_timeout_s=http.header_timeout_s, max_connections=http.max_connections),
        timeout_keep_alive=http.keep_alive_timeout_s,
        limit_concurrency=http.max_connections,
    )
    await uvicorn.Server(config).serve()
