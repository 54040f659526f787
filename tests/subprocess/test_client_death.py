"""A stdio client that dies mid-turn: the end of a client is no error. The server logs one line, shuts down as
at end of input, and the turn is stored `cancelled`; no traceback reaches stderr."""

from __future__ import annotations

import json
import os
import signal
import sys

import anyio
import pytest
from mcp import Client

from tests.subprocess.helpers import REPO, ServerDirs, server_env, statuses, structured

pytestmark = pytest.mark.anyio

CLIENT = REPO / "tests" / "fakes" / "stdio_client.py"


async def test_a_client_killed_mid_turn_ends_the_server_quietly_and_the_turn_cancelled(dirs: ServerDirs) -> None:
    config = dirs.root / "agent.json"
    config.write_text(json.dumps({"heartbeat_s": 0.02}))  # the server keeps writing while the model is slow
    script = [{"delay_s": 60, "content": "never"}, {"content": "later"}]
    server_argv = [*dirs.argv(script), "--config", str(config)]
    errlog = dirs.root / "server.stderr"
    with anyio.fail_after(30):
        async with await anyio.open_process(
            [sys.executable, str(CLIENT), str(errlog), "--", *server_argv], env=server_env()
        ) as client:
            assert client.stdout is not None
            pid = int((await client.stdout.receive()).decode().strip())
            server = os.pidfd_open(pid)  # not our child: wait on its pidfd
            client.send_signal(signal.SIGKILL)
            await client.wait()
        try:
            await anyio.wait_readable(server)  # readable once the server process has exited
        finally:
            os.close(server)
        async with Client(dirs.params(script), mode="legacy") as check:
            sessions = (await structured(check, "session_list"))["sessions"]
            session = await structured(check, "session_get", {"session_id": sessions[0]["session_id"]})
    stderr = errlog.read_text()
    assert statuses(session) == ["cancelled"]
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
    assert stderr.count("the client closed the connection") == 1, stderr
