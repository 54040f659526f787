"""The stdio transport of a mounted server: one child process, its pipes, its stderr and its end.

Modelled on the SDK's `mcp.client.stdio.stdio_client` (same framing, same shielded and bounded
shutdown, the child in its own process group killed as a group), with what a host of many mounts
needs on top:

- the child's pid and an event set when its stdout ends (the connection is dead: crash detection);
- stdout split into lines in linear time, each at most `max_line_bytes` (default `MAX_LINE_BYTES`):
  a longer line ends the connection at once, with `failure` saying why (see `agent_server/lines.py`);
- the child's stderr read through a pipe into the agent server's log (logger
  `agent_server.mounts.stderr`, one record per line, prefixed with the server name), never onto
  stdout, with the last lines kept for error messages;
- a shutdown short enough for the agent server to exit within about 2 seconds: stdin is closed,
  the child gets `stop_grace_s` to exit, then its process group gets SIGTERM and, `kill_grace_s`
  later, SIGKILL. The group is signalled even when the child exited by itself, so grandchildren it
  left behind (an `npx` wrapper's `node`) go too.

POSIX only; `connection.py` uses the SDK's `stdio_client` on Windows.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress

import anyio
import anyio.lowlevel
import mcp_types as types
from anyio.abc import AsyncResource, Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

from agent_server.child_process import release_pipes, terminate_group, wait_exit
from agent_server.lines import MAX_LINE_BYTES, LineAssembler, LineTooLong

logger = logging.getLogger(__name__)
stderr_logger = logging.getLogger("agent_server.mounts.stderr")

_WRITER_FLUSH_S = 0.5
_REAP_S = 2.0
_STDERR_DRAIN_S = 0.2
_MAX_STDERR_LINE = 4096


class StdioProcess:
    """One spawn of a stdio server. `transport()` is the `Transport` handed to `mcp.Client`."""

    def __init__(
        self,
        name: str,
        command: str,
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | None,
        stop_grace_s: float = 1.0,
        kill_grace_s: float = 0.5,
        stderr_tail_lines: int = 20,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        self.name = name
        self._max_line_bytes = max_line_bytes
        self._argv = [command, *args]
        self._env = dict(env)
        self._cwd = cwd
        self._stop_grace_s = stop_grace_s
        self._kill_grace_s = kill_grace_s
        self._tail: deque[str] = deque(maxlen=stderr_tail_lines)
        self.pid: int | None = None
        self._process: Process | None = None
        self.closed = anyio.Event()
        """Set when the child's stdout ended: nothing more will come over this connection."""
        self.failure: str | None = None
        """Why this side ended the connection (a line over the limit), if it did."""

    @property
    def returncode(self) -> int | None:
        """The exit status once the child exited (negative: the signal that killed it)."""
        return self._process.returncode if self._process is not None else None

    async def wait_exit(self, timeout: float) -> int | None:
        """Wait at most `timeout` for the child to exit; its exit status, or None if it is still running."""
        if self._process is None:
            return None
        await wait_exit(self._process, timeout)
        return self._process.returncode

    def stderr_tail(self) -> str:
        """The child's last stderr lines, joined by ` | ` (empty if it wrote none)."""
        return " | ".join(self._tail)

    @asynccontextmanager
    async def transport(self) -> AsyncGenerator[TransportStreams]:
        read_fd, write_fd = os.pipe()
        try:
            try:
                process = await anyio.open_process(
                    self._argv, env=self._env, cwd=self._cwd, stderr=write_fd, start_new_session=True
                )
            finally:
                os.close(write_fd)  # the child has its own copy
        except BaseException:
            os.close(read_fd)
            raise
        self.pid, self._process = process.pid, process
        try:
            async with self._pipes(process, read_fd) as streams:
                yield streams
        finally:
            os.close(read_fd)

    @asynccontextmanager
    async def _pipes(self, process: Process, stderr_fd: int) -> AsyncGenerator[TransportStreams]:
        read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
        writer_done = anyio.Event()
        stderr_done = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._read_stdout, process, read_writer)
            tg.start_soon(self._write_stdin, process, write_reader, read_writer, writer_done)
            tg.start_soon(self._pump_stderr, stderr_fd, stderr_done)
            try:
                yield read_stream, write_stream
            finally:
                with anyio.CancelScope(shield=True):
                    read_stream.close()
                    write_stream.close()
                    with anyio.move_on_after(_WRITER_FLUSH_S):
                        await writer_done.wait()
                    await self._stop(process)
                    with anyio.move_on_after(_STDERR_DRAIN_S):
                        await stderr_done.wait()
                    for stream in (read_stream, write_stream, read_writer, write_reader):
                        await stream.aclose()
                tg.cancel_scope.cancel()
        await anyio.lowlevel.cancel_shielded_checkpoint()

    async def _read_stdout(self, process: Process, sink: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
        assert process.stdout is not None
        assembler = LineAssembler(self._max_line_bytes)
        try:
            async with sink:
                async for chunk in process.stdout:
                    for raw in assembler.feed(chunk):
                        line = raw.decode("utf-8", errors="replace")
                        if line.strip():
                            await sink.send(_parse_line(self.name, line))
        except LineTooLong as exc:
            self.failure = f"{exc}; the connection was closed"
            logger.warning("mounted server %r: %s", self.name, self.failure)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            pass  # our own shutdown, or the session went away
        finally:
            self.closed.set()
            await _drain(process)

    async def _write_stdin(
        self,
        process: Process,
        source: MemoryObjectReceiveStream[SessionMessage],
        read_writer: MemoryObjectSendStream[SessionMessage | Exception],
        done: anyio.Event,
    ) -> None:
        assert process.stdin is not None
        try:
            async with source:
                async for message in source:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the child stopped reading: end the session's reads too
        finally:
            done.set()

    async def _pump_stderr(self, fd: int, done: anyio.Event) -> None:
        """Log the child's stderr line by line until every holder of the pipe's write end is gone."""
        os.set_blocking(fd, False)
        pending = b""
        try:
            while True:
                await anyio.wait_readable(fd)
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    break
                *lines, pending = (pending + chunk).split(b"\n")
                if len(pending) > _MAX_STDERR_LINE:
                    lines, pending = [*lines, pending], b""
                for line in lines:
                    self._log_stderr(line)
            if pending:
                self._log_stderr(pending)
        finally:
            done.set()

    def _log_stderr(self, raw: bytes) -> None:
        line = raw.decode("utf-8", errors="replace").rstrip()[:_MAX_STDERR_LINE]
        if line:
            self._tail.append(line)
            stderr_logger.info("[%s] %s", self.name, line)

    async def _stop(self, process: Process) -> None:
        """Close stdin, give the child `stop_grace_s`, then SIGTERM/SIGKILL its whole process group."""
        assert process.stdin is not None and process.stdout is not None
        await _close(process.stdin)
        await wait_exit(process, self._stop_grace_s)
        await terminate_group(process, self._kill_grace_s)  # returns at once if the group is gone
        if not await wait_exit(process, _REAP_S):
            logger.warning("mounted server %r (pid %d) survived SIGKILL; abandoning it", self.name, process.pid)
        await _close(process.stdout)
        release_pipes(process)


def _parse_line(name: str, line: str) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        logger.warning("mounted server %r wrote a line that is not JSON-RPC: %.200s", name, line)
        return exc


async def _drain(process: Process) -> None:
    """Discard the child's remaining stdout, so a child blocked on a full pipe can still see stdin close."""
    assert process.stdout is not None
    with (
        anyio.CancelScope(shield=True),
        suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError),
    ):
        while True:
            await process.stdout.receive()


async def _close(stream: AsyncResource) -> None:
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.aclose()
