"""The event-loop stdout writer: whole messages through a full pipe, and fd 1 diverted while serving."""

from __future__ import annotations

import logging
import os

import anyio
import pytest

from agent_server.server.stdout import FdWriter

pytestmark = pytest.mark.anyio


async def test_a_message_larger_than_the_pipe_arrives_whole() -> None:
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    message = "x" * (1024 * 1024) + "\n"  # far more than a pipe holds: the writer must wait for the reader
    received = bytearray()

    def drain() -> None:
        while not received.endswith(b"\n"):
            received.extend(os.read(read_fd, 65536))

    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, drain)
                await FdWriter(write_fd).write(message)
    finally:
        os.close(read_fd)
        os.close(write_fd)
    assert received.decode() == message


async def test_a_client_gone_is_logged_once_and_ends_the_input(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agent_server.server.stdout")
    read_fd, write_fd = os.pipe()
    os.close(read_fd)  # the client died: nobody reads the wire any more
    ended: list[bool] = []
    writer = FdWriter(write_fd, on_closed=lambda: ended.append(True))
    try:
        with anyio.fail_after(5):
            await writer.write('{"jsonrpc": "2.0"}\n')
            await writer.write('{"jsonrpc": "2.0"}\n')  # dropped
    finally:
        os.close(write_fd)
    assert writer.closed and ended == [True]
    gone = [r for r in caplog.records if "the client closed the connection" in r.getMessage()]
    assert len(gone) == 1
