"""The command-line clients of clients/ run end to end against a real server."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.subprocess.helpers import MODES, REPO, server_env

pytestmark = pytest.mark.anyio


DEMO_ANSWER = "I listed the top level of this workspace with list_dir."


async def test_run_turn_client_prints_progress_on_stderr_and_the_answer_on_stdout(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("whatever the workspace holds\n")
    client = REPO / "clients" / "python" / "run_turn.py"
    with anyio.fail_after(30):
        done = await anyio.run_process([sys.executable, str(client)], cwd=tmp_path, env=server_env(), check=False)
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, stderr
    assert stdout.startswith(DEMO_ANSWER) and stdout.count("\n") == 1
    progress = [line for line in stderr.splitlines() if re.match(r"\[\s*\d+\] ", line)]
    assert "[  3] sampling (round 1)" in progress, stderr
    assert any(" list_dir: ok in " in line for line in progress), stderr
    assert progress[-1].endswith("done: completed")
    left = sorted([p.name async for p in anyio.Path(tmp_path).iterdir()])
    assert left == ["notes.txt"]  # the state went to a temporary dir


async def test_readme_demo_command_works_in_a_workspace_without_a_readme(tmp_path: Path) -> None:
    command = readme_demo_command()
    assert command[:2] == ["python", "clients/python/run_turn.py"], command
    argv = [sys.executable, str(REPO / command[1]), *command[2:]]
    with anyio.fail_after(30):
        done = await anyio.run_process(argv, cwd=tmp_path, env=server_env(), check=False)  # an empty workspace
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().startswith(DEMO_ANSWER)


def readme_demo_command() -> list[str]:
    """The demo command of the README's first line: `pip install . && python ... # comment`."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    first_block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    words = shlex.split(first_block.splitlines()[0], comments=True)
    return words[len(words) - words[::-1].index("&&") :]


@pytest.mark.parametrize("mode", MODES)
async def test_the_demo_script_keeps_answering_turn_after_turn_inside_a_host(tmp_path: Path, mode: str) -> None:
    demo = REPO / "clients" / "demo" / "list_workspace.json"
    args = ["-m", "agent_server", "--workspace", str(tmp_path), "--state-dir", str(tmp_path / "state")]
    params = StdioServerParameters(command=sys.executable, args=[*args, "--llm", f"script:{demo}"], env=server_env())
    with anyio.fail_after(30):
        async with Client(params, mode=mode) as client:
            results = [await client.call_tool("run_turn", {"prompt": f"turn {n}"}) for n in range(3)]
    assert [result.structured_content["status"] for result in results] == ["completed"] * 3
    assert all(result.content[0].text.startswith(DEMO_ANSWER) for result in results)


async def test_run_turn_client_exits_1_when_the_turn_fails(tmp_path: Path) -> None:
    client = REPO / "clients" / "python" / "run_turn.py"
    script = tmp_path / "fails.json"
    script.write_text(json.dumps({"responses": [{"error": {"message": "provider down"}}]}))
    argv = [sys.executable, str(client), "--llm", f"script:{script}"]
    with anyio.fail_after(30):
        done = await anyio.run_process(argv, cwd=tmp_path, env=server_env(), check=False)
    assert done.returncode == 1
    assert done.stdout == b""
    assert "turn failed: provider down" in done.stderr.decode()


async def test_replay_command_line_passes_against_agent_server() -> None:
    replay = REPO / "clients" / "raw" / "replay.py"
    script = REPO / "clients" / "raw" / "script.json"
    command = [sys.executable, str(replay), "--", sys.executable, "-m", "agent_server", "--llm", f"script:{script}"]
    with anyio.fail_after(30):
        done = await anyio.run_process(command, env=server_env(), check=False)
    stdout = done.stdout.decode()
    assert done.returncode == 0, stdout + done.stderr.decode()
    assert "FAIL" not in stdout and stdout.splitlines()[-1].endswith(" passed, 0 failed")
