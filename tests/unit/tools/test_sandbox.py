"""What run_command's sandbox contains (real bubblewrap), and how `tools.sandbox` chooses the mode.

The bwrap tests skip where bubblewrap does not work (fail under AGENT_SERVER_REQUIRE_BWRAP=1, as in CI); the
choice tests put a fake `bwrap` (or none) on the PATH the sandbox searches. That the server's own environment
and a mounted server's are out of reach is tested with a real server process in
tests/subprocess/test_command_sandbox.py; here a process of the test stands for a mounted server.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_server.settings import ToolsOptions
from agent_server.tools.builtin import WorkspaceToolset
from agent_server.tools.sandbox import CommandSandbox, SandboxState
from agent_server.types import ToolCall, ToolResult
from tests.sandboxing import require_sandbox

pytestmark = pytest.mark.anyio


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def bwrap() -> None:
    require_sandbox("bwrap")


def toolset(
    ws: Path, *, hidden: tuple[Path, ...] = (), environ: dict[str, str] | None = None, **options: Any
) -> WorkspaceToolset:
    return with_sandbox(ws, hidden=hidden, environ=environ, **options)[0]


def with_sandbox(
    ws: Path, *, hidden: tuple[Path, ...] = (), environ: dict[str, str] | None = None, **options: Any
) -> tuple[WorkspaceToolset, CommandSandbox]:
    tools_options = ToolsOptions(exec=True, **{"command_kill_grace_s": 0.2, **options})
    environ = dict(os.environ) if environ is None else environ
    sandbox = CommandSandbox.from_options(tools_options, hidden=hidden, environ=environ)
    tools = WorkspaceToolset(ws, read_max_bytes=1000, search_max_matches=5, options=tools_options, sandbox=sandbox)
    return tools, sandbox


async def run(tools: WorkspaceToolset, command: str) -> ToolResult:
    with anyio.fail_after(30):
        return await tools.call_tool(ToolCall(id="c1", name="run_command", arguments={"command": command}))


def stdout(result: ToolResult) -> str:
    assert not result.is_error, result.text()
    return result.text().partition("--- stdout ---\n")[2].partition("\n--- stderr ---")[0]


# --- the bwrap sandbox ---------------------------------------------------------------------------------


@pytest.fixture
def stand_in_mount() -> Iterator[int]:
    """A process of the test with a secret in its environment, as a mounted stdio server has its token."""
    env = {"PATH": os.defpath, "MOUNT_TOKEN": "tok-planted-5150"}
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize("mode", ["bwrap", "none"])
async def test_under_bwrap_no_other_process_is_visible_nor_its_environment(
    ws: Path, mode: str, stand_in_mount: int
) -> None:
    require_sandbox(mode)
    command = "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c tok-planted; ls /proc | grep -c '^[0-9]'"
    found, processes = stdout(await run(toolset(ws, sandbox=mode), command)).split()
    if mode == "none":  # the control: without a sandbox the probe does find the secret
        assert found == "1" and await anyio.Path(f"/proc/{stand_in_mount}").exists()
        return
    assert found == "0"
    assert int(processes) <= 4  # bwrap, the shell and its pipeline: nothing of the machine


async def test_under_bwrap_a_workspace_of_slash_still_gets_its_own_proc(stand_in_mount: int, bwrap: None) -> None:
    command = "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c tok-planted; ls /proc | grep -c '^[0-9]'"
    found, processes = stdout(await run(toolset(Path("/")), command)).split()  # the command only reads
    assert found == "0" and int(processes) <= 4


@pytest.fixture
def probes() -> Iterator[list[Path]]:
    """Files a command must fail to create outside the workspace; removed afterwards should one be made."""
    name = f"agent-server-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    paths = [Path(d, name) for d in ("/etc", "/", os.environ.get("HOME", "/root"), "/var/tmp")]
    yield paths
    for path in paths:
        path.unlink(missing_ok=True)


async def test_under_bwrap_writes_outside_the_workspace_fail_and_the_workspace_is_writable(
    ws: Path, bwrap: None, probes: list[Path]
) -> None:
    targets = " ".join(str(path) for path in probes)
    command = (
        f'for target in {targets}; do touch "$target" && echo "wrote $target"; done 2>&1; '
        "mount -o remount,rw / 2>/dev/null || echo no-remount; "
        f"touch {probes[1]} 2>/dev/null || echo still-read-only; "
        "echo inside > made.txt && echo workspace-ok"
    )
    text = (await run(toolset(ws), command)).text()
    assert "wrote" not in text and text.count("Read-only file system") == 4, text
    assert "no-remount" in text and "still-read-only" in text  # no capability left to undo it
    assert "workspace-ok" in text
    assert await anyio.Path(ws / "made.txt").read_text() == "inside\n"
    for path in probes:
        assert not await anyio.Path(path).exists()


async def test_under_bwrap_tmp_is_private_and_writable(ws: Path, tmp_path: Path, bwrap: None) -> None:
    (tmp_path / "host-only").write_text("of the machine's /tmp")
    name = f"agent-server-private-{os.getpid()}"
    command = f"echo x > /tmp/{name} && echo $TMPDIR && ls /tmp && ls {tmp_path}"
    try:
        lines = stdout(await run(toolset(ws), command)).splitlines()
        assert lines[0] == "/tmp" and name in lines  # TMPDIR points to the private /tmp, which is writable
        assert lines[-1] == "ws"  # of the machine's /tmp only the workspace's mount point is there
        assert not await anyio.Path("/tmp", name).exists()
    finally:
        await anyio.Path("/tmp", name).unlink(missing_ok=True)


async def test_under_bwrap_the_state_dir_and_config_files_are_covered(ws: Path, tmp_path: Path, bwrap: None) -> None:
    state = ws / ".agent_server"
    state.mkdir()
    (state / "state.db").write_text("session secrets")
    config = tmp_path / "agent-server.toml"
    config.write_text('openai = { api_key = "sk-in-config" }')
    inner_config = ws / "mcp.json"
    inner_config.write_text('{"mcpServers": {}}')
    command = (
        f"ls -A {state}; cat {state}/state.db; touch {state}/x; cat {config}; echo changed > {config}; "
        f"cat {inner_config}; rm -f {inner_config}; echo done"
    )
    result = await run(toolset(ws, hidden=(state, config, inner_config)), command)
    text = result.text()
    assert "session secrets" not in text and "sk-in-config" not in text and "mcpServers" not in text
    assert "done" in text
    assert (state / "state.db").read_text() == "session secrets" and not (state / "x").exists()
    assert config.read_text() == 'openai = { api_key = "sk-in-config" }'
    assert inner_config.exists()


async def test_a_hidden_path_that_contains_the_workspace_is_left_as_the_rest_of_the_disk(
    ws: Path, tmp_path: Path, bwrap: None
) -> None:
    result = await run(toolset(ws, hidden=(tmp_path,)), "echo ok > made.txt && cat made.txt")
    assert stdout(result) == "ok"


async def test_under_bwrap_ordinary_tools_work(ws: Path, bwrap: None) -> None:
    (ws / "notes.txt").write_text("hello\n")
    command = "ls; python3 -c 'print(6 * 7)'; command -v git >/dev/null && git init -q && git status --short"
    lines = stdout(await run(toolset(ws), command)).splitlines()
    assert lines[:2] == ["notes.txt", "42"]
    if len(lines) > 2:  # git is installed
        assert lines[2:] == ["?? notes.txt"]


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP port on the machine's loopback that accepts connections."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


@pytest.mark.parametrize("network", [False, True])
async def test_under_bwrap_the_network_is_off_unless_allowed(
    ws: Path, bwrap: None, listener: int, network: bool
) -> None:
    connect = f"import socket; socket.create_connection(('127.0.0.1', {listener}), timeout=5); print('connected')"
    result = await run(toolset(ws, sandbox_network=network), f'python3 -c "{connect}" 2>&1 | tail -1')
    text = stdout(result)
    assert (text == "connected") is network, text


# --- choosing the mode ---------------------------------------------------------------------------------


def fake_bwrap(directory: Path, *, works: bool) -> Path:
    """A `bwrap` on PATH that logs each run; it fails as in a container without user namespaces, or runs the
    command after `--` (no sandbox at all: enough to see which mode was chosen)."""
    directory.mkdir()
    log = directory / "runs.log"
    body = (
        'shift $(( $(printf "%s\\n" "$@" | grep -n -m1 "^--$" | cut -d: -f1) )); exec "$@"'
        if works
        else ('echo "bwrap: No permissions to create a new namespace" >&2; exit 1')
    )
    path = directory / "bwrap"
    path.write_text(f"#!/bin/sh\necho run >> {log}\n{body}\n")
    path.chmod(0o755)
    return log


def path_with(directory: Path) -> dict[str, str]:
    """An environment whose PATH has `directory` first, then only the system's (no real bwrap there)."""
    system = [d for d in ("/usr/bin", "/bin") if Path(d).is_dir()]
    return {"PATH": os.pathsep.join([str(directory), *system])}


async def test_required_bwrap_that_is_missing_refuses_every_command_saying_why(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    tools, sandbox = with_sandbox(ws, sandbox="bwrap", environ={"PATH": str(tmp_path / "bin")})
    result = await run(tools, "touch made-here")
    assert result.is_error
    assert result.text() == (
        'run_command is refused: tools.sandbox is "bwrap", but bwrap not found on PATH (install bubblewrap); '
        "nothing was run"
    )
    assert not (ws / "made-here").exists()
    assert (await sandbox.state()).mode == "refused"


async def test_required_bwrap_that_does_not_work_refuses_commands(ws: Path, tmp_path: Path) -> None:
    fake_bwrap(tmp_path / "bin", works=False)
    result = await run(toolset(ws, sandbox="bwrap", environ=path_with(tmp_path / "bin")), "touch made-here")
    assert (
        result.is_error and "bwrap does not work here: bwrap: No permissions to create a new namespace" in result.text()
    )
    assert not (ws / "made-here").exists()


async def test_auto_falls_back_to_no_sandbox_when_bwrap_does_not_work(ws: Path, tmp_path: Path) -> None:
    fake_bwrap(tmp_path / "bin", works=False)
    tools, sandbox = with_sandbox(ws, sandbox="auto", environ=path_with(tmp_path / "bin"))
    assert stdout(await run(tools, "echo ran > made.txt; cat made.txt")) == "ran"
    assert await sandbox.state() == SandboxState(
        "none",
        "bwrap does not work here: bwrap: No permissions to create a new namespace (tools.sandbox is auto)",
        True,
    )


async def test_bwrap_is_probed_once_and_only_when_a_command_first_runs(ws: Path, tmp_path: Path) -> None:
    log = fake_bwrap(tmp_path / "bin", works=True)
    tools, sandbox = with_sandbox(ws, sandbox="auto", environ=path_with(tmp_path / "bin"))
    await tools.list_tools()
    assert not log.exists()  # building the tools (server start-up) runs nothing
    for _ in range(3):
        assert stdout(await run(tools, "echo hi")) == "hi"
    assert log.read_text() == "run\n" * 4  # one trial run, then one run per command
    assert await sandbox.state() == SandboxState("bwrap", "bwrap works here", False)


async def test_none_never_looks_for_bwrap(ws: Path, tmp_path: Path) -> None:
    log = fake_bwrap(tmp_path / "bin", works=True)
    tools, sandbox = with_sandbox(ws, sandbox="none", environ=path_with(tmp_path / "bin"))
    assert stdout(await run(tools, "echo hi")) == "hi"
    assert not log.exists()
    assert await sandbox.state() == SandboxState("none", 'tools.sandbox is "none"', True)
