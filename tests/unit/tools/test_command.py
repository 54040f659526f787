"""run_command: exit code, capped output, confinement of cwd, minimal environment, and that nothing it starts
outlives the call, in both sandbox modes (see test_sandbox.py for what the bwrap sandbox contains)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_server.settings import ToolsOptions
from agent_server.tools.builtin import WorkspaceToolset
from agent_server.tools.command import CappedOutput
from agent_server.types import ToolCall, ToolResult
from tests.sandboxing import ESCAPES, MODES, escape, marker, require_sandbox, wait_gone, wait_sleeping

pytestmark = pytest.mark.anyio


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "notes.txt").write_text("hello\n")
    (tmp_path / "outside").mkdir()
    return root


def make_tools(ws: Path, **options: Any) -> WorkspaceToolset:
    tools_options = ToolsOptions(exec=True, **{"command_kill_grace_s": 0.2, **options})
    return WorkspaceToolset(ws, read_max_bytes=1000, search_max_matches=5, options=tools_options)


async def run(tools: WorkspaceToolset, command: str, **arguments: Any) -> ToolResult:
    return await tools.call_tool(ToolCall(id="call_1", name="run_command", arguments={"command": command, **arguments}))


async def assert_gone(pids: list[int]) -> None:
    """Every pid has exited and been reaped (bounded; polling is the only way to see a process end)."""
    with anyio.fail_after(10):
        for pid in pids:
            while True:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                await anyio.sleep(0.05)


async def test_the_exit_code_is_stated_and_a_non_zero_exit_is_not_an_error(ws: Path) -> None:
    result = await run(make_tools(ws), "cat notes.txt; echo oops >&2; exit 3")
    assert result.is_error is False
    assert result.text() == "exit code 3\n--- stdout ---\nhello\n--- stderr ---\noops"
    assert result.structured == {"exit_code": 3, "cwd": ".", "stdout_bytes": 6, "stderr_bytes": 5}
    quiet = await run(make_tools(ws), "true", cwd="sub")
    assert quiet.text() == "exit code 0\n[no output]" and quiet.structured is not None
    assert quiet.structured["cwd"] == "sub"


async def test_each_output_stream_is_capped_keeping_head_and_tail(ws: Path) -> None:
    command = "head -c 50000 /dev/zero | tr '\\0' a; printf END; head -c 30000 /dev/zero | tr '\\0' b >&2"
    result = await run(make_tools(ws, command_output_max_bytes=1000), command)
    text = result.text()
    assert "[... 49003 bytes cut from the middle ...]" in text
    assert "[... 29000 bytes cut from the middle ...]" in text
    assert "aaaa" in text and "END\n--- stderr ---" in text
    assert len(text) < 2500
    assert result.structured is not None and result.structured["stdout_bytes"] == 50003


def test_capped_output_memory_stays_bounded_however_much_comes() -> None:
    output = CappedOutput(100)
    for i in range(1000):
        output.feed(bytes([65 + i % 26]) * 1000)
    assert output.total == 1_000_000 and output.cut == 1_000_000 - 100
    head, _, tail = output.text().partition("\n[... 999900 bytes cut from the middle ...]\n")
    assert (head, tail) == ("A" * 50, "L" * 50)


@pytest.mark.parametrize("cwd", ["..", "/", "out", "notes.txt"])
async def test_a_cwd_outside_the_workspace_or_not_a_directory_is_refused(ws: Path, tmp_path: Path, cwd: str) -> None:
    (ws / "out").symlink_to(tmp_path / "outside", target_is_directory=True)
    result = await run(make_tools(ws), "touch made-here", cwd=cwd)
    assert result.is_error
    assert "outside the workspace" in result.text() or "not a directory" in result.text()
    assert not (tmp_path / "outside" / "made-here").exists() and not (ws / "made-here").exists()


async def test_a_command_with_a_nul_character_is_an_error_result(ws: Path) -> None:
    result = await run(make_tools(ws), "echo a\x00b")
    assert result.is_error and "NUL character" in result.text()


async def test_the_environment_is_minimal_and_has_no_api_key(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    monkeypatch.setenv("SOME_TOKEN", "also-secret")
    result = await run(make_tools(ws), "env")
    assert not result.is_error
    assert "sk-test-secret" not in result.text() and "also-secret" not in result.text()
    assert "PATH=" in result.text()


async def test_stdin_is_empty(ws: Path) -> None:
    result = await run(make_tools(ws), "cat; echo read-done")
    assert result.text() == "exit code 0\n--- stdout ---\nread-done"


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    require_sandbox(request.param)
    return request.param


@pytest.mark.parametrize("how", ESCAPES)
async def test_nothing_a_command_started_outlives_its_exit(ws: Path, mode: str, how: str) -> None:
    mark = marker()
    with anyio.fail_after(15):
        result = await run(make_tools(ws, sandbox=mode), f"{escape(how, mark)} echo started")
    assert result.text() == "exit code 0\n--- stdout ---\nstarted"
    assert (ws / "up").read_text() == "up\n"  # the sleeper ran
    await wait_gone(mark)


@pytest.mark.parametrize("how", ESCAPES)
async def test_cancelling_the_call_ends_everything_it_started(ws: Path, mode: str, how: str) -> None:
    mark = marker()
    tools = make_tools(ws, sandbox=mode)
    outcome: list[ToolResult] = []

    async def call() -> None:
        outcome.append(await run(tools, f"{escape(how, mark)} sleep {mark}"))

    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await wait_sleeping(mark, 2)  # the escaped sleeper, and the shell's own sleep after it
            tg.cancel_scope.cancel()
    assert outcome == []
    await wait_gone(mark)


async def test_a_timeout_kills_a_shell_that_ignores_sigterm_and_its_child(ws: Path, mode: str) -> None:
    mark = marker()
    stubborn = f"trap '' TERM; sleep {mark} & sleep {mark}"  # both sleeps ignore SIGTERM too
    tools = make_tools(ws, sandbox=mode, command_timeout_s=0.5)
    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_sleeping, mark, 2)
            result = await run(tools, stubborn, timeout_s=60)  # the argument cannot raise the limit
    assert result.is_error and "time limit of 0.5 s" in result.text()
    # Without a sandbox the shell outlasts SIGTERM and gets SIGKILL; under bwrap, bwrap ends on SIGTERM
    # and takes the whole PID namespace with it.
    assert ("killed by signal SIGKILL" if mode == "none" else "killed by signal SIGTERM") in result.text()
    await wait_gone(mark)


async def test_run_command_is_off_by_default(ws: Path) -> None:
    tools = WorkspaceToolset(ws, read_max_bytes=10, search_max_matches=1)
    assert "run_command" not in {spec.name for spec in await tools.list_tools()}
    result = await run(tools, "touch made-here")
    assert result.is_error and "unknown tool" in result.text()
    assert not (ws / "made-here").exists()


async def test_a_cancel_while_the_child_is_being_spawned_still_kills_it(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child runs before `open_process` returns (asyncio still connects its pipes): a cancel must not lose it."""
    real_open_process = anyio.open_process
    spawned = anyio.Event()
    pids: list[int] = []

    async def slow_to_connect(*args: Any, **kwargs: Any) -> Any:
        process = await real_open_process(*args, **kwargs)
        pids.append(process.pid)
        spawned.set()
        await anyio.sleep(0.2)  # the pipe set-up that follows the spawn, made long enough to cancel in
        return process

    monkeypatch.setattr("agent_server.tools.command.anyio.open_process", slow_to_connect)
    tools = make_tools(ws)
    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, tools, "sleep 1000")
            await spawned.wait()
            tg.cancel_scope.cancel()
        await assert_gone(pids)
