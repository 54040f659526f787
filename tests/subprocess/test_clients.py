"""The command-line clients of clients/ run end to end against a real server."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import anyio
import pytest

from tests.subprocess.helpers import REPO, server_env

pytestmark = pytest.mark.anyio


async def test_run_turn_client_prints_progress_on_stderr_and_the_answer_on_stdout(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# agent-server\n\nAn agent runtime served over MCP.\n")
    client = REPO / "clients" / "python" / "run_turn.py"
    with anyio.fail_after(30):
        done = await anyio.run_process([sys.executable, str(client)], cwd=tmp_path, env=server_env(), check=False)
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, stderr
    assert stdout.startswith("The README introduces agent-server") and stdout.count("\n") == 1
    progress = [line for line in stderr.splitlines() if re.match(r"\[\s*\d+\] ", line)]
    assert "[  3] sampling (round 1)" in progress, stderr
    assert progress[-1].endswith("done: completed")
    left = sorted([p.name async for p in anyio.Path(tmp_path).iterdir()])
    assert left == ["README.md"]  # the state went to a temporary dir


async def test_run_turn_client_exits_1_when_the_turn_fails(tmp_path: Path) -> None:
    client = REPO / "clients" / "python" / "run_turn.py"  # no README.md: the demo model's expectation fails
    with anyio.fail_after(30):
        done = await anyio.run_process([sys.executable, str(client)], cwd=tmp_path, env=server_env(), check=False)
    assert done.returncode == 1
    assert done.stdout == b""
    assert "turn failed: script response 1: the request does not contain 'agent-server'" in done.stderr.decode()


async def test_replay_command_line_passes_against_agent_server() -> None:
    replay = REPO / "clients" / "raw" / "replay.py"
    script = REPO / "clients" / "raw" / "script.json"
    command = [sys.executable, str(replay), "--", sys.executable, "-m", "agent_server", "--llm", f"script:{script}"]
    with anyio.fail_after(30):
        done = await anyio.run_process(command, env=server_env(), check=False)
    stdout = done.stdout.decode()
    assert done.returncode == 0, stdout + done.stderr.decode()
    assert "FAIL" not in stdout and stdout.splitlines()[-1].endswith(" passed, 0 failed")
