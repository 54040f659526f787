"""uvicorn's HTTP/1.1 protocol (h11) with the two bounds it lacks: a header deadline and a connection cap.

uvicorn times out only idle kept-alive connections (`timeout_keep_alive`, reset by every byte received), so a
client that opens a connection and sends nothing, or trickles its request line and headers a byte at a time,
holds a descriptor (and a slot of `limit_concurrency`) for as long as it likes (Slowloris). Here:

- each connection must deliver its request line and headers within `header_timeout_s`, counted from when it
  opened and, kept alive, from the first byte of each next request; past that it is closed. The deadline ends
  as soon as the headers are in, so a long request (a turn streaming for minutes) is never cut;
- a connection beyond `max_connections` open at once is closed as it opens, before anything is read.

uvicorn's own bounds stay on top (`timeout_keep_alive`, `limit_concurrency`'s 503). h11 is used whichever HTTP
parsers are installed (uvicorn's `auto` would switch to httptools, which this protocol does not extend).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger(__name__)


class BoundedH11Protocol(H11Protocol):
    """See the module docstring; `bounded_protocol` makes one with the settings' values."""

    header_timeout_s: float = 10.0
    max_connections: int = 512
    _header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            logger.debug("refused a connection: %d are open (http.max_connections)", len(self.connections) - 1)
            transport.close()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:  # a request line and headers still to come: from the first byte
            if self._header_deadline is None:
                self._arm()
        else:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._header_deadline = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_late(self) -> None:
        self._header_deadline = None
        if self.conn.their_state is not h11.IDLE or self.transport.is_closing():
            return
        logger.debug("closed a connection whose request headers took longer than http.header_timeout_s")
        with contextlib.suppress(h11.LocalProtocolError):
            self.conn.send(h11.ConnectionClosed())
        self.transport.close()


def bounded_protocol(*, header_timeout_s: float, max_connections: int) -> type[BoundedH11Protocol]:
    """The protocol class to give `uvicorn.Config(http=...)`."""
    return type(
        "BoundedH11Protocol",
        (BoundedH11Protocol,),
        {"header_timeout_s": header_timeout_s, "max_connections": max_connections},
    )
