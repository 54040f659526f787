"""The stdio wire with stderr merged into it (`2>&1`): the server keeps the SDK's blocking writer and answers."""

from __future__ import annotations

import contextlib
import json
import subprocess

import anyio
import pytest

from tests.subprocess.helpers import ServerDirs, server_env

pytestmark = pytest.mark.anyio

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


async def test_initialize_is_answered_when_stderr_shares_the_stdout_pipe(dirs: ServerDirs) -> None:
    argv = dirs.argv([], log_level="ERROR")
    process = await anyio.open_process(argv, env=server_env(), stderr=subprocess.STDOUT)
    async with process:
        assert process.stdin is not None and process.stdout is not None
        await process.stdin.send(json.dumps(INITIALIZE).encode() + b"\n")
        received = b""
        with anyio.fail_after(20):
            while b"\n" not in received:
                received += await process.stdout.receive()
        await process.stdin.aclose()
        with anyio.fail_after(10):
            await process.wait()
    reply = json.loads(received.split(b"\n")[0])
    assert reply["id"] == 1 and reply["result"]["serverInfo"]["name"] == "agent-server"


async def test_a_client_line_over_the_message_limit_is_answered_up_to_it_then_the_server_exits(
    dirs: ServerDirs,
) -> None:
    """A client that never ends its line cannot grow the server's memory: past 64 MiB the connection ends."""
    argv = dirs.argv([], log_level="ERROR")
    process = await anyio.open_process(argv, env=server_env())
    async with process:
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        await process.stdin.send(json.dumps(INITIALIZE).encode() + b"\n")
        received = b""
        with anyio.fail_after(20):
            while b"\n" not in received:
                received += await process.stdout.receive()
            chunk = b"x" * (1024 * 1024)
            with contextlib.suppress(anyio.BrokenResourceError):  # the server may close its end first
                for _ in range(65):  # 65 MiB and no newline
                    await process.stdin.send(chunk)
        with anyio.fail_after(20):
            code = await process.wait()
        errors = (await process.stderr.receive()).decode()
    assert json.loads(received.split(b"\n")[0])["id"] == 1
    assert code == 0
    assert "the client wrote a line longer than 67108864 bytes" in errors
