"""The stdio guard every door serves behind: the wire off fds 0 and 1, bounded lines in, whole messages out.

`claim_stdio` moves the wire to private descriptors while serving: fd 0 then reads the null device and fd 1
points at stderr, so a child process or a stray `print`/`input()` can never corrupt a message or steal one.
Everything is restored on exit.

`LineReader` reads the wire on the event loop: it waits for the descriptor to become readable
(`anyio.wait_readable`) and reads what is there, with no worker thread per line (a pipe or a socket, what
every host gives its server; another descriptor, a terminal or a file, is read in a worker thread). Lines are
split in linear time and bounded (`MAX_LINE_BYTES`, `agent_server/lines.py`): past the limit the input ends as at
end of input (logged; the lines before it are still served), since the stream cannot resynchronise. Blank
lines are skipped; bytes that are no UTF-8 are replaced.

`WireWriter` writes whole messages, in order; inside `batching()` (both doors serve inside it) what is sent at
one moment is gathered and written in one system call by a writer task, the queue bounded (`MAX_QUEUED_BYTES`:
past it a sender waits). On a pipe or socket of its own it writes with
non-blocking `os.write`, waiting for the descriptor only when it is full (O_NONBLOCK belongs to the open file,
which a terminal, or a pipe stderr was merged into with `2>&1`, shares with stderr: there each write is a
blocking one in a worker thread). A client that went away (its end is closed) is no error: the first write
that finds it gone logs one line, later writes are dropped, and the input ends, so the door shuts down as at
end of input instead of failing with a traceback.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
from collections import deque
from collections.abc import AsyncGenerator, Generator
from contextlib import asynccontextmanager, contextmanager

import anyio
import anyio.lowlevel
import anyio.to_thread

from agent_server.lines import MAX_LINE_BYTES, LineAssembler, LineTooLong

logger = logging.getLogger(__name__)

GONE = (BrokenPipeError, ConnectionResetError)
"""What writing to a pipe or socket whose reader has gone raises."""
_CHUNK = 256 * 1024
MAX_QUEUED_BYTES = 1024 * 1024
"""What `WireWriter.batching` lets wait for the wire before a sender waits too (a client that reads slowly)."""


class LineReader:
    """The wire's lines, as the async iteration over lines of `anyio.AsyncFile[str]` that the MCP SDK's stdin
    reader uses (and the ACP wire reads)."""

    def __init__(self, fd: int, *, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._fd = fd
        self._pollable = _is_pipe_or_socket(fd)
        self._assembler = LineAssembler(max_line_bytes, writer="the client")
        self._ready: deque[str] = deque()
        self._ended = False
        self._waiting: anyio.CancelScope | None = None

    def end(self) -> None:
        """End the input now, as at end of input (the client is gone). Lines already read are still served."""
        self._ended = True
        if self._waiting is not None:
            self._waiting.cancel()

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> str:
        while not self._ready:
            if self._ended:
                raise StopAsyncIteration
            await self._fill()
        return self._ready.popleft()

    async def _fill(self) -> None:
        chunk: bytes | None = None  # stays None when `end` cancels the wait
        with anyio.CancelScope() as self._waiting:
            chunk = await self._read()
        self._waiting = None
        if self._ended or chunk is None:
            return
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

    async def _read(self) -> bytes:
        """What the descriptor holds now (b"": end of input)."""
        if self._pollable:
            await anyio.wait_readable(self._fd)
            # This process is the descriptor's only reader: after readiness a read returns at once.
            return os.read(self._fd, _CHUNK)
        return await anyio.to_thread.run_sync(os.read, self._fd, _CHUNK, abandon_on_cancel=True)

    def _add(self, lines: list[bytes]) -> None:
        # A blank line is no message (the SDK's reader would hand the parser an empty string).
        self._ready.extend(line.decode("utf-8", errors="replace") for line in lines if line.strip())


class WireWriter:
    """Whole messages to the wire (the `write` and `flush` of `anyio.AsyncFile[str]` the MCP SDK's stdout writer
    calls); see the module docstring."""

    def __init__(self, fd: int, *, reader: LineReader | None = None, max_queued: int = MAX_QUEUED_BYTES) -> None:
        self._fd = fd
        self._reader = reader
        self._nonblocking = not os.get_blocking(fd)  # `claim_stdio` made it so where that touches nothing else
        self._lock = anyio.Lock(fast_acquire=True)
        self._max_queued = max_queued
        self._queued: list[bytes] = []
        self._queued_bytes = 0
        self._batching = False
        """Messages are queued: a writer task (`batching`) runs."""
        self._draining = False
        """The batch has ended: the writer task writes what is queued and ends."""
        self._wake = anyio.Event()
        """Set when a message is queued or the batch ends (only the writer task waits on it)."""
        self._room = anyio.Event()
        """Set (and replaced) when the queue is emptied: senders waiting on a full queue look again."""
        self.closed = False
        """The client closed its end: nothing more is written."""

    async def write(self, text: str) -> None:
        """Write one whole message. Inside `batching()` it is queued instead (waiting only while `max_queued` bytes
        wait already) and written, with whatever else was queued by then, once the loop gets round to it."""
        data = text.encode("utf-8")
        if not self._batching:
            await self._write_whole(data)
            await anyio.lowlevel.checkpoint()
            return
        while self._queued_bytes >= self._max_queued and self._batching and not self.closed:
            await self._room.wait()
        if not self._batching:  # the writer task ended (cancelled) while this one waited for room
            await self._write_whole(data)
            return
        if not self.closed:
            self._queued.append(data)
            self._queued_bytes += len(data)
            self._wake.set()

    @asynccontextmanager
    async def batching(self) -> AsyncGenerator[None]:
        """While the block runs, messages written are gathered and written together: messages sent at one moment
        (a turn's events, a burst of answers) cost one system call, and a sender does not wait for the write. At
        the end of the block what is queued is written; a cancelled block drops it."""
        async with anyio.create_task_group() as tg:
            self._batching = True
            tg.start_soon(self._write_queued)
            try:
                yield
            finally:
                self._draining = True
                self._wake.set()

    async def flush(self) -> None:
        """Nothing is buffered outside `batching()`, and inside it the writer task writes the queue."""

    async def _write_queued(self) -> None:
        """The writer task of `batching`: everything queued, in one write, until the batch ends."""
        try:
            while True:
                if not self._queued:
                    if self._draining:
                        return
                    await self._wake.wait()
                    self._wake = anyio.Event()  # only this task waits on it
                    continue
                data = b"".join(self._queued)
                self._drop_queue()
                await self._write_whole(data)
        finally:
            self._batching = self._draining = False
            self._drop_queue()

    def _drop_queue(self) -> None:
        self._queued.clear()
        self._queued_bytes = 0
        room, self._room = self._room, anyio.Event()
        room.set()  # the senders waiting for room look again

    async def _write_whole(self, data: bytes) -> None:
        view = memoryview(data)
        async with self._lock:
            while view and not self.closed:
                try:
                    written = await self._write(view)
                except BlockingIOError:
                    await anyio.wait_writable(self._fd)
                    continue
                except GONE as exc:
                    self._client_gone(exc)
                    break
                view = view[written:]

    async def _write(self, data: memoryview) -> int:
        if self._nonblocking:
            return os.write(self._fd, data)
        return await anyio.to_thread.run_sync(os.write, self._fd, data)

    def _client_gone(self, exc: OSError) -> None:
        self.closed = True
        self._drop_queue()
        logger.info("the client closed the connection (%s): shutting down as at end of input", exc.strerror)
        if self._reader is not None:
            self._reader.end()


@contextmanager
def claim_stdio() -> Generator[tuple[LineReader, WireWriter]]:
    """Move the wire off fds 0 and 1 (see the module docstring) and yield its reader and writer."""
    with _claim_stdin() as stdin, _claim_stdout() as stdout:
        reader = LineReader(stdin)
        yield reader, WireWriter(stdout, reader=reader)


@contextmanager
def _claim_stdin() -> Generator[int]:
    wire = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        yield wire
    finally:
        os.dup2(wire, 0)
        os.close(wire)


@contextmanager
def _claim_stdout() -> Generator[int]:
    sys.stdout.flush()
    wire = os.dup(1)
    os.dup2(2, 1)
    nonblocking = _owns_its_open_file(wire)
    was_blocking = os.get_blocking(wire)
    if nonblocking:
        os.set_blocking(wire, False)
    try:
        yield wire
    finally:
        if nonblocking:
            os.set_blocking(wire, was_blocking)
        sys.stdout.flush()
        os.dup2(wire, 1)
        os.close(wire)


def _is_pipe_or_socket(fd: int) -> bool:
    """Whether the event loop can wait on `fd` (`epoll` cannot wait on a regular file; POSIX only)."""
    if sys.platform == "win32":
        return False
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _owns_its_open_file(fd: int) -> bool:
    """Whether `fd` may go non-blocking without touching stderr: a pipe or socket, not the open file of fd 2."""
    if not _is_pipe_or_socket(fd):
        return False
    try:
        out, err = os.fstat(fd), os.fstat(2)
    except OSError:
        return False
    return (out.st_dev, out.st_ino) != (err.st_dev, err.st_ino)
