"""Mounted servers as real child processes: crashes, restarts, startup failures and timeouts, shutdown
leaving no process behind, stderr routing, the minimal environment, cancellation over the wire."""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_server.errors import ToolFailure
from agent_server.mounts.config import MountConfig
from agent_server.mounts.toolset import MountManager
from agent_server.types import ToolCall, ToolResult
from tests.fakes import mcp_echo
from tests.unit.mounts.helpers import (
    ECHO,
    SILENT,
    Progress,
    alive,
    echo_stdio,
    in_process,
    mounted,
    poll_until,
    read_pid,
    wait_until_gone,
    written,
)

# Real server processes killed, hung and restarted (seconds each): the subprocess tier, not the fast one.
pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]
ENVIRON = {"PATH": os.environ["PATH"], "HOME": "/home/agent", "SECRET_TOKEN": "do-not-leak"}


async def test_stdio_calls_progress_cancel_then_killed_mid_call_and_restarted(tmp_path: Path) -> None:
    config = echo_stdio("echo", timeout_s=20, env={"MINE": "1"})
    async with mounted([config], environ=ENVIRON) as manager:
        env = await manager.call_tool(
            ToolCall(id="c1", name="echo__env", arguments={"names": ["PATH", "HOME", "SECRET_TOKEN", "MINE"]})
        )
        assert env.structured == {"PATH": ENVIRON["PATH"], "HOME": "/home/agent", "SECRET_TOKEN": None, "MINE": "1"}

        progress = Progress()
        began = time.perf_counter()
        burst = await manager.call_tool(
            ToolCall(id="c2", name="echo__burst", arguments={"n": 5000}), on_progress=progress
        )
        intervals = (time.perf_counter() - began) / 0.1  # the manager's default progress interval
        assert burst.text() == "5000" and progress.updates[-1] == (5000.0, 5000.0, "tick 5000")
        assert len(progress.updates) <= min(intervals + 2, 4999)  # coalesced: one per interval, and the last

        cancelled, started = tmp_path / "cancelled", tmp_path / "sleeping"
        arguments = {"seconds": 30, "marker": str(cancelled), "started": str(started)}
        async with anyio.create_task_group() as tg:
            tg.start_soon(manager.call_tool, ToolCall(id="c3", name="echo__sleep", arguments=arguments))
            await poll_until(lambda: bool(written(started)))  # the call is running: cancel it now
            tg.cancel_scope.cancel()
        await poll_until(lambda: written(cancelled) == "cancelled")  # notifications/cancelled reached the server

        await kill_mid_call_then_restart(manager, tmp_path / "started")


async def kill_mid_call_then_restart(manager: MountManager, started: Path) -> None:
    connection = manager.connections["echo"]
    first_pid = connection.pid
    assert first_pid is not None and alive(first_pid)
    results: list[ToolResult] = []

    async def call(call_id: str, tool: str, arguments: dict[str, Any]) -> None:
        results.append(await manager.call_tool(ToolCall(id=call_id, name=tool, arguments=arguments)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call, "c4", "echo__sleep", {"seconds": 30, "started": str(started)})
        await poll_until(lambda: bool(written(started)))
        killed_at = time.perf_counter()
        os.kill(first_pid, signal.SIGKILL)
    assert time.perf_counter() - killed_at < 10.0  # at once, not at the 20 s timeout
    (result,) = results
    assert result.is_error and "killed by signal 9" in result.text()
    assert manager.states()[0]["state"] == "failed"
    assert "killed by signal 9" in (manager.states()[0]["error"] or "")
    assert [t.name for t in await manager.list_tools()]  # still offered: a call restarts it

    results.clear()
    async with anyio.create_task_group() as tg:  # three calls at once: one restart serves them all
        for call_id in ("c5", "c6", "c7"):
            tg.start_soon(call, call_id, "echo__pid", {})
    assert [r.is_error for r in results] == [False] * 3
    assert {r.text() for r in results} == {str(connection.pid)}
    assert connection.pid != first_pid
    assert manager.states()[0]["state"] == "ready"
    assert not alive(first_pid)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    """A copy of the echo fake, to be broken between two starts."""
    copy = tmp_path / "server.py"
    copy.write_text(Path(ECHO).read_text())
    return copy


def break_script(script: Path) -> None:
    script.write_text("import sys\nprint('broken on purpose', file=sys.stderr)\nsys.exit(7)\n")


async def test_a_crash_names_its_status_and_stderr_and_a_failing_restart_stays_failed(
    script: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO, logger="agent_server.mounts.stderr")
    config = MountConfig(name="flaky", command=sys.executable, args=[str(script), "--hello"], timeout_s=10)
    async with mounted([config]) as manager:
        crashed = await manager.call_tool(ToolCall(id="c1", name="flaky__crash", arguments={"code": 3}))
        assert crashed.is_error
        assert "exited with status 3" in crashed.text() and "crashing on purpose" in crashed.text()

        break_script(script)
        started = time.perf_counter()
        refused = await manager.call_tool(ToolCall(id="c2", name="flaky__echo", arguments={"text": "x"}))
        assert refused.is_error and "failed to restart" in refused.text()
        assert "exited with status 7" in refused.text() and "broken on purpose" in refused.text()
        again = await manager.call_tool(
            ToolCall(id="c3", name="flaky__echo", arguments={"text": "x"})
        )  # backoff, one more attempt
        assert again.is_error and "status 7" in again.text()
        assert time.perf_counter() - started < 5
        (state,) = manager.states()
        assert state["state"] == "failed" and "status 7" in state["error"]
    lines = [r.getMessage() for r in caplog.records if r.name == "agent_server.mounts.stderr"]
    assert "[flaky] hello from fake-echo on stderr" in lines
    assert "[flaky] crashing on purpose" in lines and "[flaky] broken on purpose" in lines
    out = capfd.readouterr().out
    assert "hello" not in out and "crashing" not in out and "broken" not in out  # never on stdout


async def test_a_missing_command_fails_with_the_reason_and_the_others_work() -> None:
    configs = [MountConfig(name="ghost", command="/nonexistent/mcp-server"), in_process("echo")]
    async with mounted(configs, {"echo": mcp_echo.build()}) as manager:
        ghost, echo = manager.states()
        assert ghost["state"] == "failed"
        assert ghost["error"] == "cannot start '/nonexistent/mcp-server': No such file or directory"
        assert echo["state"] == "ready"
        assert manager.unavailable() == [("ghost", ghost["error"])]
        assert {t.source for t in await manager.list_tools()} == {"mcp:echo"}
        assert (
            await manager.call_tool(ToolCall(id="c", name="echo__echo", arguments={"text": "fine"}))
        ).text() == "fine"
        with pytest.raises(ToolFailure, match="failed to restart: cannot start"):  # one attempt per call
            await manager.connections["ghost"].call_tool("anything", {})


async def test_a_server_that_never_answers_times_out_at_startup(tmp_path: Path) -> None:
    pid_file = tmp_path / "silent.pid"
    config = MountConfig(name="mute", command=sys.executable, args=[SILENT, str(pid_file)], startup_timeout_s=0.5)
    async with MountManager([config]) as manager:
        pid = await read_pid(pid_file)
        started = time.perf_counter()
        with anyio.fail_after(5):
            await manager.wait_started()
        assert time.perf_counter() - started < 1.5
        (state,) = manager.states()
        assert state["state"] == "failed"
        assert state["error"].startswith("startup timed out after 0.5 s")
        assert "it will never answer" in state["error"]  # its stderr
        await wait_until_gone(pid)


async def test_shutdown_leaves_no_process_behind(tmp_path: Path) -> None:
    def silent(name: str, *flags: str) -> MountConfig:
        return MountConfig(name=name, command=sys.executable, args=[SILENT, str(tmp_path / name), *flags])

    configs = [
        echo_stdio("echo", "--pid-file", str(tmp_path / "echo")),
        silent("stuck"),  # reads stdin, never answers: still starting at shutdown
        silent("deaf", "--ignore-stdin"),
        silent("stubborn", "--ignore-stdin", "--ignore-sigterm", "--child", str(tmp_path / "grandchild")),
    ]
    manager = MountManager(configs, stop_grace_s=0.3)
    async with manager:
        pids = [await read_pid(tmp_path / name) for name in ("echo", "stuck", "deaf", "stubborn", "grandchild")]
        with anyio.fail_after(10):
            await manager.connections["echo"].wait_settled()
        assert [s["state"] for s in manager.states()] == ["ready", "starting", "starting", "starting"]
        assert all(alive(pid) for pid in pids)
        stopping = time.perf_counter()
    took = time.perf_counter() - stopping
    assert took < 0.3 + 0.5 + 1.0, took  # grace, SIGTERM grace, slack
    assert [pid for pid in pids if alive(pid)] == []
    assert {s["state"] for s in manager.states()} == {"stopped"}


FLOOD = str(Path(__file__).resolve().parents[2] / "fakes" / "mcp_flood.py")


async def test_a_line_over_the_limit_fails_that_server_cleanly_and_a_restart_works() -> None:
    from agent_server.mounts.stdio import MAX_LINE_BYTES

    config = MountConfig(name="flood", command=sys.executable, args=[FLOOD])
    megabytes = MAX_LINE_BYTES // (1 << 20) + 4
    async with mounted([config, in_process("echo")], {"echo": mcp_echo.build()}) as manager:
        with anyio.fail_after(60):
            flooded = await manager.call_tool(
                ToolCall(id="c1", name="flood__flood", arguments={"megabytes": megabytes})
            )
        limit = f"the server wrote a line longer than {MAX_LINE_BYTES} bytes (the limit of one message)"
        assert flooded.is_error and limit in flooded.text(), flooded.text()
        flood, echo = manager.states()
        assert flood["state"] == "failed" and limit in (flood["error"] or "")
        assert echo["state"] == "ready"  # the other server is untouched
        assert (
            await manager.call_tool(ToolCall(id="c2", name="echo__echo", arguments={"text": "still here"}))
        ).text() == "still here"
        with anyio.fail_after(30):
            again = await manager.call_tool(
                ToolCall(id="c3", name="flood__ping", arguments={})
            )  # the next call restarts the server
        assert (again.is_error, again.text()) == (False, "ok")
