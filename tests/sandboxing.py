"""Helpers for the tests of `run_command`'s sandbox: whether bubblewrap works here, and processes found by a marker.

The bwrap tests skip, saying so, where bwrap is missing or cannot make namespaces; with
`AGENT_SERVER_REQUIRE_BWRAP=1` (CI installs bubblewrap) they fail instead.

A command's processes are found from the outside by a marker in their command line (a sleep of a duration no
other process has): inside a PID namespace a command only knows its own pids, which mean nothing out here.
Nothing here imports agent_server: the subprocess tests use it too.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

REQUIRE_ENV = "AGENT_SERVER_REQUIRE_BWRAP"
MODES = ["bwrap", "none"]
"""The `tools.sandbox` values whose behaviour is tested (auto is one of them, depending on the machine)."""
_TRIAL = ["--unshare-pid", "--unshare-net", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", "true"]
_counter = itertools.count()


def bwrap_problem() -> str | None:
    """None when bwrap can make a sandbox here, else why not."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bwrap is not installed (Debian: apt-get install bubblewrap)"
    done = subprocess.run([bwrap, *_TRIAL], capture_output=True, text=True, timeout=30, check=False)
    return None if done.returncode == 0 else f"bwrap does not work here: {done.stderr.strip()}"


def require_sandbox(mode: str) -> None:
    """Skip (fail under AGENT_SERVER_REQUIRE_BWRAP=1) a test of the bwrap mode where bwrap does not work."""
    if mode != "bwrap" or (problem := bwrap_problem()) is None:
        return
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {problem}")
    pytest.skip(problem)


def marker() -> str:
    """A sleep duration that no other process on the machine sleeps (pid and a counter in it)."""
    return f"{os.getpid()}{next(_counter):03d}.25"


def escape(how: str, mark: str) -> str:
    """A command part that starts `sleep MARK` the way `how` says, and returns once it runs.

    The sleeper writes `up` first (its shell execs sleep after): waiting for that file, not for time."""
    sleeper = f"echo up > up; exec sleep {mark}"
    start = {
        "background": f"sh -c '{sleeper}' &",
        "setsid": f"setsid sh -c '{sleeper}' &",
        "setpgid": f'python3 -c \'import os; os.setpgid(0, 0); os.execvp("sh", ["sh", "-c", "{sleeper}"])\' &',
        "double-fork": f"(setsid sh -c '{sleeper}' &);",
    }[how]
    return f"{start} until [ -s up ]; do sleep 0.01; done;"


ESCAPES = ["background", "setsid", "setpgid", "double-fork"]


def live_with(mark: str) -> list[int]:
    """The running (not zombie) processes whose command line contains `mark`."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            zombie = "\nState:\tZ" in (entry / "status").read_text()
        except OSError:  # gone meanwhile
            continue
        if mark.encode() in cmdline and not zombie:
            found.append(int(entry.name))
    return found


async def wait_gone(mark: str, timeout: float = 2.0) -> None:
    """Until no process with `mark` runs; fails after `timeout` naming the survivors (polled: other processes)."""
    try:
        with anyio.fail_after(timeout):
            while live_with(mark):  # noqa: ASYNC110 - other processes: polling is the only way
                await anyio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"processes outlived the call: {_kill_survivors(mark)}") from None


async def wait_sleeping(mark: str, count: int, timeout: float = 10.0) -> None:
    """Until `count` processes run `sleep MARK` (not merely have the marker in their command line)."""
    argv = b"sleep\0" + mark.encode() + b"\0"
    with anyio.fail_after(timeout):
        while len([pid for pid in live_with(mark) if _cmdline(pid) == argv]) < count:  # noqa: ASYNC110 - other processes
            await anyio.sleep(0.02)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _kill_survivors(mark: str) -> dict[int, bytes]:
    """SIGKILL what outlived a test, so that it leaves nothing behind; their command lines."""
    survivors: dict[int, bytes] = {}
    for pid in live_with(mark):
        survivors[pid] = _cmdline(pid)
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
    return survivors
