"""A stdout for the SDK's stdio transport that writes from the event loop, without worker threads.

The SDK wraps stdout in `anyio.wrap_file`, so every message costs two worker-thread round trips
(`write`, then `flush`): about 0.2 ms each, paid by every progress notification of a turn. This
writer puts the wire descriptor in non-blocking mode and writes with `os.write`, waiting for the
descriptor to become writable (`anyio.wait_writable`) only when the pipe is full.

Because the SDK skips its own claim of fd 1 when given a stdout, `claim_stdout` does it: the wire
moves to a private descriptor and fd 1 points at stderr while serving, so a stray `print` or a
child process writing to fd 1 can never corrupt the stream. Everything is restored on exit.

A client that goes away (it exited or was killed: the pipe's other end is closed) is no error: the first
write that finds it gone logs one line, later writes are dropped, and `on_closed` ends the input, so the
server shuts down as at end of input (running turns recorded `cancelled`) instead of failing with a traceback.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Generator
from contextlib import contextmanager

import anyio

logger = logging.getLogger(__name__)

GONE = (BrokenPipeError, ConnectionResetError)
"""What writing to a pipe or socket whose reader has gone raises."""


class FdWriter:
    """The two methods of `anyio.AsyncFile[str]` the SDK's stdout writer calls."""

    def __init__(self, fd: int, *, on_closed: Callable[[], None] | None = None) -> None:
        self._fd = fd
        self._on_closed = on_closed
        self.closed = False
        """The client closed its end: nothing more is written."""

    async def write(self, text: str) -> None:
        data = memoryview(text.encode("utf-8"))
        while data and not self.closed:
            try:
                written = os.write(self._fd, data)
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
                continue
            except GONE as exc:
                self._client_gone(exc)
                break
            data = data[written:]
        await anyio.lowlevel.checkpoint()

    def _client_gone(self, exc: OSError) -> None:
        self.closed = True
        logger.info("the client closed the connection (%s): shutting down as at end of input", exc.strerror)
        if self._on_closed is not None:
            self._on_closed()

    async def flush(self) -> None:
        """Nothing is buffered."""


def can_claim_stdout() -> bool:
    """Whether the wire can go non-blocking without touching anything else.

    O_NONBLOCK belongs to the open file, which a terminal, or a pipe that stderr was merged into
    (`2>&1`), shares with stderr; there the SDK's own blocking writer is kept.
    """
    try:
        out, err = os.fstat(1), os.fstat(2)
    except OSError:
        return False
    return not os.isatty(1) and (out.st_dev, out.st_ino) != (err.st_dev, err.st_ino)


@contextmanager
def claim_stdout(*, on_closed: Callable[[], None] | None = None) -> Generator[FdWriter]:
    """Move the wire off fd 1 (which then points at stderr) and yield a writer for it (`on_closed`: see
    `FdWriter`)."""
    sys.stdout.flush()
    wire = os.dup(1)
    os.dup2(2, 1)
    was_blocking = os.get_blocking(wire)
    os.set_blocking(wire, False)
    try:
        yield FdWriter(wire, on_closed=on_closed)
    finally:
        os.set_blocking(wire, was_blocking)
        sys.stdout.flush()
        os.dup2(wire, 1)
        os.close(wire)
