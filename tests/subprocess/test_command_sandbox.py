"""run_command against a real agent-server process: the secrets in the server's environment and in a mounted
server's are out of a sandboxed command's reach, and nothing a command started survives a SIGKILL of the
server, in either sandbox mode (bwrap, or none with its supervisor)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.sandboxing import MODES, escape, marker, require_sandbox, wait_gone, wait_sleeping
from tests.subprocess.helpers import REPO, ServerDirs, load_replay, server_env
from tests.subprocess.test_raw import INITIALIZE, tools_call

pytestmark = pytest.mark.anyio

API_KEY = "sk-planted-0451"
MOUNT_TOKEN = "tok-planted-0452"


def server_argv(dirs: ServerDirs, sandbox: str, command: str, *, mount: bool = False) -> list[str]:
    """A server whose model runs `command` once, with run_command on (allowed without asking), and with `mount`
    a mounted stdio server that has a token in its environment."""
    config: dict[str, Any] = {"tools": {"exec": True, "sandbox": sandbox}, "approvals": {"default": "allow"}}
    if mount:
        echo = [str(REPO / "tests" / "fakes" / "mcp_echo.py"), "--pid-file", str(dirs.root / "mount.pid")]
        server = {"command": sys.executable, "args": echo, "env": {"MOUNT_TOKEN": MOUNT_TOKEN}}
        config["mcpServers"] = {"echo": server}
    (dirs.root / "config.json").write_text(json.dumps(config))
    script: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "run_command", "arguments": {"command": command}}]},
        {"content": "done"},
    ]
    return [*dirs.argv(script), "--config", str(dirs.root / "config.json")]


async def wait_file(path: Path) -> str:
    file = anyio.Path(path)
    while not (await file.is_file() and await file.read_text()):  # noqa: ASYNC110 - written by another process
        await anyio.sleep(0.02)
    return await file.read_text()


@pytest.mark.parametrize("sandbox", MODES)
async def test_a_command_cannot_read_the_secrets_of_the_server_or_of_a_mounted_server(
    dirs: ServerDirs, sandbox: str
) -> None:
    require_sandbox(sandbox)
    command = (
        "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -e sk-planted -e tok-planted | sort -u > seen; "
        "echo looked >> seen"
    )
    replay = load_replay()
    env = {**server_env(), "OPENAI_API_KEY": API_KEY}
    with anyio.fail_after(30):
        async with replay.RawServer.spawn(
            server_argv(dirs, sandbox, command, mount=True), env=env, stderr=subprocess.DEVNULL
        ) as raw:
            await raw.request(INITIALIZE)
            await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            await wait_file(dirs.root / "mount.pid")  # the mounted server runs, its token in its environment
            turn, _ = await raw.request(tools_call(1, "run_turn", {"prompt": "look"}))
            assert turn["result"]["structuredContent"]["status"] == "completed", turn
            await raw.finish()
    seen = (dirs.workspace / "seen").read_text().splitlines()
    if sandbox == "none":  # the control: without a sandbox both are readable (the README says so)
        assert seen == [f"MOUNT_TOKEN={MOUNT_TOKEN}", f"OPENAI_API_KEY={API_KEY}", "looked"]
    else:
        assert seen == ["looked"]


@pytest.mark.parametrize("sandbox", MODES)
@pytest.mark.parametrize("how", ["setsid", "setpgid"])
async def test_nothing_a_command_started_survives_a_sigkill_of_the_server(
    dirs: ServerDirs, sandbox: str, how: str
) -> None:
    require_sandbox(sandbox)
    mark = marker()
    replay = load_replay()
    argv = server_argv(dirs, sandbox, f"{escape(how, mark)} sleep {mark}")
    with anyio.fail_after(30):
        async with replay.RawServer.spawn(argv, env=server_env(), stderr=subprocess.DEVNULL) as raw:
            await raw.request(INITIALIZE)
            await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            await raw.send(tools_call(1, "run_turn", {"prompt": "start things"}))
            await wait_sleeping(mark, 2, timeout=20)  # the escaped sleeper, and the shell's own sleep
            os.kill(raw.pid, signal.SIGKILL)  # the server only (not its process group): no cleanup runs
            assert await raw.process.wait() == -signal.SIGKILL
    await wait_gone(mark, timeout=2)
