"""On stdin EOF or SIGTERM agent-server stops every mount (whole process groups) and exits promptly."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from tests.subprocess.helpers import REPO, ServerDirs, load_replay, server_env
from tests.subprocess.test_raw import INITIALIZE, tools_call

pytestmark = pytest.mark.anyio

FAKES = REPO / "tests" / "fakes"


def _alive(pid: int) -> bool:
    """Running, that is: a zombie (killed, waiting to be reaped by whatever init the machine has) is not."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


async def _wait_for_files(*paths: Path) -> list[int]:
    # The mounts are other processes: poll for the pid files they write when they start.
    while not all(p.is_file() and p.read_text() for p in paths):  # noqa: ASYNC110 - another process
        await anyio.sleep(0.05)
    return [int(p.read_text()) for p in paths]


def _config(dirs: ServerDirs) -> Path:
    silent = [str(FAKES / "mcp_silent.py"), str(dirs.root / "stuck.pid"), "--ignore-stdin", "--ignore-sigterm"]
    silent += ["--child", str(dirs.root / "grandchild.pid")]
    servers = {
        "stuck": {"command": sys.executable, "args": silent},
        "echo": {
            "command": sys.executable,
            "args": [str(FAKES / "mcp_echo.py"), "--pid-file", str(dirs.root / "echo.pid")],
        },
    }
    path = dirs.root / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


@pytest.mark.parametrize("how", ["stdin-eof", "sigterm"])
async def test_shutdown_leaves_no_mounted_process_behind(dirs: ServerDirs, how: str) -> None:
    argv = dirs.argv([]) + ["--mcp-config", str(_config(dirs))]
    process = await anyio.open_process(argv, env=server_env(), stderr=subprocess.DEVNULL)
    async with process:
        with anyio.fail_after(20):
            pids = await _wait_for_files(*(dirs.root / n for n in ("stuck.pid", "grandchild.pid", "echo.pid")))
        started = time.monotonic()
        if how == "sigterm":
            process.send_signal(signal.SIGTERM)
        else:
            assert process.stdin is not None
            await process.stdin.aclose()
        with anyio.fail_after(10):
            code = await process.wait()
        elapsed = time.monotonic() - started
    assert code == 0
    assert elapsed < 4, f"took {elapsed:.1f}s to exit"
    assert [pid for pid in pids if _alive(pid)] == []


async def test_sigterm_during_a_backtracking_search_still_shuts_down_promptly(dirs: ServerDirs) -> None:
    """The model's regex runs without holding the interpreter, so the signal is handled at once."""
    (dirs.workspace / "data.csv").write_text(",".join(["field"] * 40) + "\n")
    config = dirs.root / "config.json"
    config.write_text(json.dumps({"search_timeout_s": 120}))  # far beyond the test: only SIGTERM can end it
    search = {"tool_calls": [{"name": "search_text", "arguments": {"pattern": r"(.*?,){20}X"}}]}
    command = dirs.argv([search, {"content": "never"}]) + ["--config", str(config)]
    replay = load_replay()
    with anyio.fail_after(30):
        async with replay.RawServer.spawn(command, cwd=dirs.root, env=server_env()) as raw:
            await raw.request(INITIALIZE)
            await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            await raw.send(tools_call(1, "run_turn", {"prompt": "search"}, token="search"))
            while True:
                message = await raw.receive()
                assert "id" not in message, f"the turn answered: {message}"
                if message["params"].get("message") == "search_text: started":
                    break
            started = time.monotonic()
            raw.process.send_signal(signal.SIGTERM)
            with anyio.fail_after(10):
                code = await raw.process.wait()
            elapsed = time.monotonic() - started
    assert code == 0
    assert elapsed < 4, f"took {elapsed:.1f}s to exit"
