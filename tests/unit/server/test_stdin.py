"""The event-loop stdin reader: lines split anywhere, a last line without its newline, a bounded line, fd 0 diverted."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from agent_server.server.stdin import FdReader, can_claim_stdin, claim_stdin

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


async def read_all(reader: FdReader) -> list[str]:
    return [line async for line in reader]


async def test_lines_split_across_reads_come_out_whole_and_the_last_one_without_its_newline_too() -> None:
    with pipe() as (read_fd, write_fd), anyio.fail_after(10):
        reader = FdReader(read_fd)
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
        reader = FdReader(read_fd, max_line_bytes=1000)
        with caplog.at_level(logging.ERROR, logger="agent_server.server.stdin"):
            lines = await read_all(reader)
    assert lines == ['{"ok":1}']
    assert "the client wrote a line longer than 1000 bytes" in caplog.text
    assert "closing the connection" in caplog.text


async def test_end_stops_a_reader_waiting_on_an_open_pipe_after_the_lines_it_read() -> None:
    with pipe() as (read_fd, write_fd):
        os.write(write_fd, b'{"a": 1}\n')  # the pipe stays open: without `end` the reader would wait on
        reader = FdReader(read_fd)
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


async def test_while_claimed_fd_0_reads_the_null_device_and_the_wire_is_restored_after() -> None:
    saved = os.dup(0)
    with pipe() as (read_fd, write_fd), anyio.fail_after(10):
        os.dup2(read_fd, 0)  # stdin is a pipe, as a host gives it
        try:
            assert can_claim_stdin()
            os.write(write_fd, b'{"jsonrpc":"2.0"}\n')
            with claim_stdin() as reader:
                assert os.read(0, 100) == b""  # a child or a stray read sees end of input, not the message
                assert await reader.__anext__() == '{"jsonrpc":"2.0"}'
            os.write(write_fd, b"after\n")
            assert os.read(0, 100) == b"after\n"
        finally:
            os.dup2(saved, 0)
            os.close(saved)


def test_a_regular_file_as_stdin_keeps_the_sdk_reader(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    with open(path, "wb") as f:
        f.write(b"{}\n")
    saved = os.dup(0)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.dup2(fd, 0)
        assert not can_claim_stdin()  # epoll cannot wait on a regular file
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(fd)
