"""The stdio wire with stderr merged into it (`2>&1`): the server keeps the SDK's blocking writer and answers."""

from __future__ import annotations

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
