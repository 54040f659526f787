"""Where `run_command`'s shell runs: in a bubblewrap sandbox, or without one under a supervisor.

`tools.sandbox` chooses: `bwrap` (required: commands are refused when it does not work here), `none`, or
`auto` (bwrap when it works, else none). Whether bwrap works is probed once per process, lazily, by the
first command (or `agent_tools`), never at start-up: `bwrap ... -- /bin/sh -c 'exit 0'` with the flags
commands get. It fails where bwrap is missing, or in a container without user namespaces.

bwrap mode (flags as the Linux sandboxes of the well-known coding agents use them):
- `--unshare-pid --proc /proc`: a PID namespace with its own /proc, so nothing of the server or of a
  mounted server is visible (no `/proc/<pid>/environ`, where API keys and mount tokens live); the
  namespace's init is bwrap, whose environment is the command's minimal one;
- `--die-with-parent`: the sandbox is SIGKILLed when the server dies, even by SIGKILL; when the shell
  exits, or bwrap is stopped, the kernel kills every process left in the namespace, whatever session or
  process group it made for itself;
- `--new-session` (no access to a controlling terminal), `--unshare-ipc`, `--cap-drop ALL` (a server
  running as root keeps no capability inside: it cannot remount what is read-only);
- `--ro-bind / /`, `--tmpfs /tmp` (a private /tmp, TMPDIR=/tmp), then `--bind WORKSPACE WORKSPACE`: the
  file system read-only, the workspace writable;
- `--unshare-net` and `--tmpfs /run` unless `tools.sandbox_network`: loopback only, and the sockets of
  the machine's daemons in /run (a database's, Docker's, D-Bus's) out of reach;
- the state dir (the session store) covered by an empty read-only tmpfs, and the server's config files
  (`--config`, `--mcp-config`) by /dev/null: neither readable nor writable. One that contains the
  workspace cannot be covered, and stays as the rest of the disk is (read-only);
- `--dev /dev` (a minimal /dev) and `--proc /proc` last, so that no bind can cover them.

none mode: no sandbox. On Linux the shell runs under `supervise.py` (a subreaper with a parent-death
signal), so nothing the command starts outlives the call or the server; elsewhere in its own process group.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio
import anyio.to_thread

from agent_server.settings import ToolsOptions

logger = logging.getLogger(__name__)

SHELL = "/bin/sh"
SUPERVISOR = Path(__file__).with_name("supervise.py")
SUPERVISOR_MARGIN_S = 1.0
"""A supervised command's stop: the supervisor's own grace, plus this long before the server SIGKILLs it."""
PROBE_TIMEOUT_S = 10.0
_PROBE_COMMAND = ("/bin/sh", "-c", "exit 0")

SandboxSetting = Literal["auto", "bwrap", "none"]
ActiveMode = Literal["bwrap", "none", "refused"]


@dataclass(frozen=True)
class SandboxState:
    """Which mode commands run in (`refused`: none, `tools.sandbox` is `bwrap` and bwrap does not work), and why."""

    mode: ActiveMode
    reason: str
    network: bool
    """Whether a command can reach the network (always in mode none)."""


@dataclass(frozen=True)
class Launch:
    """How to start one command: the argv and its environment."""

    argv: list[str]
    env: dict[str, str]


_probes: dict[tuple[str, bool], str | None] = {}
"""(bwrap path, network) -> None when it works, else why not: probed once per process."""
_probe_lock = threading.Lock()


class CommandSandbox:
    """The sandbox of every `run_command` of one runtime (the workspace is given per command)."""

    def __init__(
        self,
        setting: SandboxSetting,
        *,
        network: bool,
        hidden: Iterable[Path],
        environ: Mapping[str, str],
        kill_grace_s: float,
    ) -> None:
        """`hidden`: the state dir and config files; `environ`: the server's, whose PATH finds `bwrap`."""
        self._setting: SandboxSetting = setting
        self._network = network
        self._hidden = tuple(hidden)
        self._path = environ.get("PATH", os.defpath)
        self._grace_s = kill_grace_s
        self._state: SandboxState | None = None

    @classmethod
    def from_options(
        cls, options: ToolsOptions, *, hidden: Iterable[Path], environ: Mapping[str, str]
    ) -> CommandSandbox:
        return cls(
            options.sandbox,
            network=options.sandbox_network,
            hidden=hidden,
            environ=environ,
            kill_grace_s=options.command_kill_grace_s,
        )

    @property
    def may_sandbox(self) -> bool:
        """Whether commands may run under bwrap (the setting allows it; whether it works is probed later)."""
        return self._setting != "none"

    @property
    def stop_grace_s(self) -> float:
        """How long the server waits, after SIGTERM, for a stopped command to be gone before it SIGKILLs."""
        if self._state is not None and self._state.mode == "none" and _supervised():
            return self._grace_s + SUPERVISOR_MARGIN_S  # the supervisor ends the rest in its own grace
        return self._grace_s

    async def state(self) -> SandboxState:
        """The active mode; the first call probes bwrap (when the setting asks for it)."""
        if self._state is None:
            self._state = await self._choose()
            logger.info("run_command sandbox: %s (%s)", self._state.mode, self._state.reason)
        return self._state

    async def _choose(self) -> SandboxState:
        if self._setting == "none":
            return SandboxState("none", 'tools.sandbox is "none"', network=True)
        problem = await anyio.to_thread.run_sync(_bwrap_problem, self._path, self._network, abandon_on_cancel=True)
        if problem is None:
            why = "bwrap works here" if self._setting == "auto" else 'tools.sandbox is "bwrap"'
            return SandboxState("bwrap", why, network=self._network)
        if self._setting == "auto":
            return SandboxState("none", f"{problem} (tools.sandbox is auto)", network=True)
        return SandboxState("refused", f'tools.sandbox is "bwrap", but {problem}', network=False)

    def launch(self, command: str, *, workspace: Path, cwd: Path, env: Mapping[str, str]) -> Launch:
        """The argv and environment of `command` in the active mode, once `state()` chose it (blocking: stats
        the hidden paths)."""
        assert self._state is not None and self._state.mode != "refused", "state() chooses the mode first"
        shell = [SHELL, "-c", command]
        if self._state.mode == "bwrap":
            bwrap = shutil.which("bwrap", path=self._path) or "bwrap"  # the probe found it
            hidden = [path for path in self._hidden if path.exists()]
            argv = bwrap_argv(bwrap, shell, workspace=workspace, cwd=cwd, hidden=hidden, network=self._network)
            return Launch(argv, {**env, "TMPDIR": "/tmp"})
        if _supervised():
            supervisor = [sys.executable, "-I", "-S", str(SUPERVISOR), str(os.getpid()), f"{self._grace_s:g}"]
            return Launch(supervisor + shell, dict(env))
        return Launch(shell, dict(env))


def bwrap_argv(
    bwrap: str, command: Sequence[str], *, workspace: Path, cwd: Path, hidden: Sequence[Path], network: bool
) -> list[str]:
    """bwrap's command line for `command` (see the module docstring)."""
    return [bwrap, *_flags(network, workspace, hidden), "--chdir", str(cwd), "--", *command]


def _flags(network: bool, workspace: Path | None, hidden: Sequence[Path] = ()) -> list[str]:
    """The namespaces and the mounts, in order: each mount covers what came before it at its place, so the
    private /tmp and /run come before the workspace (which may be under /tmp), the covers of the hidden
    paths after it, and /dev and /proc last (a workspace of / would otherwise bring the machine's back)."""
    flags = ["--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--cap-drop", "ALL"]
    flags += [] if network else ["--unshare-net"]
    flags += ["--ro-bind", "/", "/", "--tmpfs", "/tmp"]
    flags += [] if network else ["--tmpfs", "/run"]
    if workspace is not None:
        flags += ["--bind", str(workspace), str(workspace)]
    for path in hidden:
        if workspace is not None and (path == workspace or workspace.is_relative_to(path)):
            continue  # covering it would cover the workspace
        if path.is_dir():
            flags += ["--tmpfs", str(path), "--remount-ro", str(path)]
        else:
            flags += ["--ro-bind", "/dev/null", str(path)]
    return [*flags, "--dev", "/dev", "--proc", "/proc"]


def _supervised() -> bool:
    """Whether a command without bwrap runs under the supervisor (it needs Linux's prctl and a Python)."""
    return sys.platform.startswith("linux") and bool(sys.executable)


def _bwrap_problem(search_path: str, network: bool) -> str | None:
    """None when bwrap works here with the flags commands get, else why not (blocking: probed once per process)."""
    if not sys.platform.startswith("linux"):
        return "bwrap needs Linux"
    bwrap = shutil.which("bwrap", path=search_path)
    if bwrap is None:
        return "bwrap not found on PATH (install bubblewrap)"
    key = (bwrap, network)
    with _probe_lock:
        if key not in _probes:
            _probes[key] = _probe(bwrap, network)
        return _probes[key]


def _probe(bwrap: str, network: bool) -> str | None:
    argv = [bwrap, *_flags(network, workspace=None), "--", *_PROBE_COMMAND]
    try:
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT_S, env={"PATH": os.defpath}
        )
    except subprocess.TimeoutExpired:
        return f"bwrap did not finish a trial run in {PROBE_TIMEOUT_S:g} s"
    except OSError as exc:
        return f"bwrap cannot be run: {exc.strerror}"
    if done.returncode == 0:
        return None
    said = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
    return "bwrap does not work here: " + (said[0] if said else f"exit code {done.returncode}")
