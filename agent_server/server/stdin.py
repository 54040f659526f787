"""A stdin for the SDK's stdio transport that reads on the event loop, without a worker thread per line.

The SDK wraps stdin in `anyio.wrap_file` and reads it with `readline`: a line is held whole however long it
grows (a client that never ends one grows the server's memory without end), and every line costs a
worker-thread round trip. This reader waits for the wire descriptor to become readable
(`anyio.wait_readable`) and reads what is there with `os.read`, on the event loop. Lines are split in linear
time and bounded (`MAX_LINE_BYTES`, as a mounted server's are, see `agent_server/lines.py`): past the limit
the connection ends as at end of input (logged; the messages before it are still served), since the stream
cannot resynchronise. Blank lines are skipped.

Only for a pipe or a socket (what every host gives its MCP server): `epoll` cannot wait on a regular file,
and a terminal is shared with the user. As with stdout, the SDK skips its claim of fd 0 when given a stdin,
so `claim_stdin` does it: the wire moves to a private descriptor and fd 0 reads the null device while
serving (a child process or a stray `input()` can never steal a message). The descriptor stays blocking:
this process is its only reader, so a read after readiness returns at once.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
from collections import deque
from collections.abc import Generator
from contextlib import contextmanager

import anyio

from agent_server.lines import MAX_LINE_BYTES, LineAssembler, LineTooLong

logger = logging.getLogger(__name__)

_CHUNK = 256 * 1024


class FdReader:
    """The async iteration over lines of `anyio.AsyncFile[str]` that the SDK's stdin reader uses."""

    def __init__(self, fd: int, *, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._fd = fd
        self._assembler = LineAssembler(max_line_bytes, writer="the client")
        self._ready: deque[str] = deque()
        self._ended = False
        self._waiting: anyio.CancelScope | None = None

    def end(self) -> None:
        """End the input now, as at end of input (the client is gone: its end of stdout closed). Lines
        already read are still served."""
        self._ended = True
        if self._waiting is not None:
            self._waiting.cancel()

    def __aiter__(self) -> FdReader:
        return self

    async def __anext__(self) -> str:
        while not self._ready:
            if self._ended:
                raise StopAsyncIteration
            await self._fill()
        return self._ready.popleft()

    async def _fill(self) -> None:
        with anyio.CancelScope() as self._waiting:
            await anyio.wait_readable(self._fd)
        self._waiting = None
        if self._ended:
            return
        chunk = os.read(self._fd, _CHUNK)
        if not chunk:
            # End of input; a last line without its newline is still a message (as `readline` gives it).
            self._ended = True
            self._add([self._assembler.rest()])
            return
        try:
            self._add(self._assembler.feed(chunk))
        except LineTooLong as exc:
            logger.error("a client message is too long: %s; closing the connection", exc)
            self._ended = True
            self._add(exc.complete)

    def _add(self, lines: list[bytes]) -> None:
        # A blank line is no message (the SDK's reader would hand the parser an empty string).
        self._ready.extend(line.decode("utf-8", errors="replace") for line in lines if line.strip())


def can_claim_stdin() -> bool:
    """Whether stdin is a pipe or a socket the event loop can wait on (POSIX)."""
    if sys.platform == "win32":
        return False
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextmanager
def claim_stdin() -> Generator[FdReader]:
    """Move the wire off fd 0 (which then reads the null device) and yield a reader for it."""
    wire = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        yield FdReader(wire)
    finally:
        os.dup2(wire, 0)
        os.close(wire)
