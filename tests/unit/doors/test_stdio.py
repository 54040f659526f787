"""The stdio guard: lines split anywhere and bounded, whole messages through a full pipe, fds 0 and 1 diverted."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from agent_server.doors.stdio import LineReader, WireWriter, claim_stdio

pytestmark = pytest.mark.anyio


@contextmanager
def pipe() -> Generator[tuple[int, int]]:
    read_fd, write_fd = os.pipe()
    try:
        yield read_fd, write_fd
    finally:
        for fd in (read_fd, write_fd):
            with contextlib.suppress(OSError):  # already closed by the test (end of input)
                os.close(fd)


async def read_all(reader: LineReader) -> list[str]:
    return [line async for line in reader]


async def test_lines_split_across_reads_come_out_whole_and_the_last_one_without_its_newline_too() -> None:
    with pipe() as (read_fd, write_fd), anyio.fail_after(10):
        reader = LineReader(read_fd)
        os.write(write_fd, b'\n{"a":')  # a blank line first: skipped
        os.write(write_fd, b'1}\n{"b":2}\n{"c"')
        assert [await reader.__anext__(), await reader.__anext__()] == ['{"a":1}', '{"b":2}']
        os.write(write_fd, b":3}\n\xc3")  # the first byte of a two-byte character: read with this line
        assert await reader.__anext__() == '{"c":3}'
        os.write(write_fd, b"\xa9\n")  # ... and the second in the next read
        assert await reader.__anext__() == "\u00e9"
        os.write(write_fd, b'{"last":true}')
        os.close(write_fd)
        assert await read_all(reader) == ['{"last":true}']


async def test_a_line_over_the_limit_ends_the_input_without_being_held_whole(caplog: pytest.LogCaptureFixture) -> None:
    with pipe() as (read_fd, write_fd), anyio.fail_after(10):
        os.write(write_fd, b'{"ok":1}\n' + b"x" * 5000)  # no newline: the reader must not wait for one
        reader = LineReader(read_fd, max_line_bytes=1000)
        with caplog.at_level(logging.ERROR, logger="agent_server.doors.stdio"):
            lines = await read_all(reader)
    assert lines == ['{"ok":1}']
    assert "the client wrote a line longer than 1000 bytes" in caplog.text
    assert "closing the connection" in caplog.text


async def test_end_stops_a_reader_waiting_on_an_open_pipe_after_the_lines_it_read() -> None:
    with pipe() as (read_fd, write_fd):
        os.write(write_fd, b'{"a": 1}\n')  # the pipe stays open: without `end` the reader would wait on
        reader = LineReader(read_fd)
        with anyio.fail_after(5):
            assert await reader.__anext__() == '{"a": 1}'
            async with anyio.create_task_group() as tg:
                rest: list[str] = []

                async def read_rest() -> None:
                    rest.extend(await read_all(reader))

                tg.start_soon(read_rest)
                await anyio.wait_all_tasks_blocked()
                reader.end()
    assert rest == []


async def test_a_regular_file_is_read_too_and_bounded_the_same_way(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_bytes(b'{"a":1}\n\n{"b":2}\n' + b"y" * 3000)
    fd = os.open(path, os.O_RDONLY)
    try:
        with anyio.fail_after(10):
            assert await read_all(LineReader(fd, max_line_bytes=1000)) == ['{"a":1}', '{"b":2}']
    finally:
        os.close(fd)


async def test_while_claimed_fds_0_and_1_are_diverted_and_the_wire_is_restored_after() -> None:
    saved_in, saved_out = os.dup(0), os.dup(1)
    with pipe() as (in_read, in_write), pipe() as (out_read, out_write), anyio.fail_after(10):
        os.dup2(in_read, 0)  # stdin and stdout are pipes, as a host gives them
        os.dup2(out_write, 1)
        try:
            os.write(in_write, b'{"jsonrpc":"2.0"}\n')
            with claim_stdio() as (reader, writer):
                assert os.read(0, 100) == b""  # a child or a stray read sees end of input, not the message
                assert await reader.__anext__() == '{"jsonrpc":"2.0"}'
                os.write(1, b"stray\n")  # goes to stderr, not the wire
                await writer.write('{"id":1}\n')
            assert os.read(out_read, 100) == b'{"id":1}\n'
            os.write(in_write, b"after\n")
            assert os.read(0, 100) == b"after\n"
        finally:
            os.dup2(saved_in, 0)
            os.dup2(saved_out, 1)
            os.close(saved_in)
            os.close(saved_out)


async def test_a_message_larger_than_the_pipe_arrives_whole() -> None:
    with pipe() as (read_fd, write_fd):
        os.set_blocking(write_fd, False)
        message = "x" * (1024 * 1024) + "\n"  # far more than a pipe holds: the writer must wait for the reader
        received = bytearray()

        def drain() -> None:
            while not received.endswith(b"\n"):
                received.extend(os.read(read_fd, 65536))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, drain)
                await WireWriter(write_fd).write(message)
    assert received.decode() == message


async def test_two_messages_sent_at_once_through_a_full_pipe_come_out_whole_and_in_order() -> None:
    with pipe() as (read_fd, write_fd):
        os.set_blocking(write_fd, False)
        first, second = "a" * 300_000 + "\n", "b" * 300_000 + "\n"
        received = bytearray()

        def drain() -> None:
            while received.count(b"\n") < 2:
                received.extend(os.read(read_fd, 65536))

        writer = WireWriter(write_fd)
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, drain)
                tg.start_soon(writer.write, first)
                tg.start_soon(writer.write, second)
    assert received.decode() in (first + second, second + first)


async def test_a_client_gone_is_logged_once_and_ends_the_input(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agent_server.doors.stdio")
    with pipe() as (in_read, _in_write), pipe() as (out_read, out_write):
        os.close(out_read)  # the client died: nobody reads the wire any more
        reader = LineReader(in_read)
        writer = WireWriter(out_write, reader=reader)
        with anyio.fail_after(5):
            await writer.write('{"jsonrpc": "2.0"}\n')
            await writer.write('{"jsonrpc": "2.0"}\n')  # dropped
            assert await read_all(reader) == []  # the input ended although its pipe is still open
    assert writer.closed
    gone = [r for r in caplog.records if "the client closed the connection" in r.getMessage()]
    assert len(gone) == 1


class CountingWrites:
    """`os.write` as the writer calls it, counted for one descriptor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.calls = 0
        self._write = os.write

    def __call__(self, fd: int, data: bytes | memoryview) -> int:
        if fd == self.fd:
            self.calls += 1
        return self._write(fd, data)


def read_now(fd: int) -> bytes:
    """What the pipe holds right now (b"" when nothing)."""
    try:
        return os.read(fd, 1 << 20)
    except BlockingIOError:
        return b""


async def test_messages_sent_at_one_moment_while_batching_are_one_write_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pipe() as (read_fd, write_fd):
        os.set_blocking(write_fd, False)
        os.set_blocking(read_fd, False)
        writes = CountingWrites(write_fd)
        monkeypatch.setattr(os, "write", writes)
        writer = WireWriter(write_fd)
        with anyio.fail_after(5):
            async with writer.batching():
                for n in range(3):
                    await writer.write(f'{{"n": {n}}}\n')
                assert read_now(read_fd) == b""  # the senders did not wait for the write
                await anyio.wait_readable(read_fd)
                assert read_now(read_fd) == b'{"n": 0}\n{"n": 1}\n{"n": 2}\n'
                assert writes.calls == 1
                await writer.write("last\n")  # queued as the block ends: written before it returns
        assert read_now(read_fd) == b"last\n"
        assert writes.calls == 2


async def test_a_full_queue_makes_the_sender_wait_until_the_reader_takes_what_is_queued() -> None:
    with pipe() as (read_fd, write_fd):
        os.set_blocking(write_fd, False)
        writer = WireWriter(write_fd, max_queued=1000)
        big = "x" * 200_000 + "\n"  # more than the pipe holds: the writer task waits for the reader
        sent: list[str] = []

        async def send(text: str) -> None:
            await writer.write(text)
            sent.append(text[0])

        received = bytearray()

        def drain() -> None:
            while received.count(b"\n") < 3:
                received.extend(os.read(read_fd, 65536))

        with anyio.fail_after(10):
            async with writer.batching(), anyio.create_task_group() as tg:
                await send(big)
                await send("y" * 2000 + "\n")  # queued while the first one waits for the pipe: the queue is full
                tg.start_soon(send, "z\n")
                await anyio.wait_all_tasks_blocked()
                assert sent == ["x", "y"]  # the third sender waits: the queue does not grow past its bound
                await anyio.to_thread.run_sync(drain)
        assert sent == ["x", "y", "z"]
        assert received.decode() == big + "y" * 2000 + "\n" + "z\n"


async def test_a_client_gone_while_batching_drops_the_queue_and_later_writes(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agent_server.doors.stdio")
    with pipe() as (in_read, _in_write), pipe() as (out_read, out_write):
        os.close(out_read)
        reader = LineReader(in_read)
        writer = WireWriter(out_write, reader=reader)
        with anyio.fail_after(5):
            async with writer.batching():
                await writer.write('{"jsonrpc": "2.0"}\n')
                assert await read_all(reader) == []  # the writer task found the client gone and ended the input
                await writer.write('{"jsonrpc": "2.0"}\n')  # dropped
    assert writer.closed
    assert len([r for r in caplog.records if "the client closed the connection" in r.getMessage()]) == 1
