"""The supervisor of one `run_command` command run without bubblewrap (Linux): nothing it starts outlives it.

Run as a script, `python -I -S supervise.py SERVER_PID GRACE_S COMMAND...`, on the standard library alone
(it imports nothing of the package, so it starts in milliseconds under any Python the server runs):

- it makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`): a process the command starts stays its
  descendant even after it leaves its process group or session (`setsid`, `setpgid(0, 0)`, a double fork),
  because an orphan is re-parented to the nearest subreaper, not to init;
- it asks the kernel for SIGTERM when the server dies (`PR_SET_PDEATHSIG`; it fires when the server's
  thread that spawned the supervisor ends: the event loop's thread, which lives as long as the server),
  and checks the server did not die before that took effect;
- it runs the command in a process group of its own (so `kill 0` in the command does not reach it), with
  SIGKILL as the command's own parent-death signal (the supervisor killed outright takes the shell along);
- it waits for the command to exit, or for SIGTERM, SIGHUP or SIGINT (the server stops the command, or
  died); then every live descendant gets SIGTERM, and SIGKILL `GRACE_S` later, round after round until
  none is left; orphans are reaped as they come. It exits as the command did: the same exit code, or
  killed by the same signal.

What it cannot stop: a command that kills the supervisor itself (same user) before escaping. Its signals
are blocked and taken with `sigwaitinfo`, so none is lost between two waits.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys
import time
from typing import NoReturn

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGHUP, signal.SIGINT})
WATCHED = STOP_SIGNALS | {signal.SIGCHLD}
_RESTORED = (signal.SIGPIPE, signal.SIGXFSZ)
"""Signals Python ignores that a command must get with their default action (as `subprocess` restores them)."""
_ROUND_S = 0.02
"""Between two SIGKILL rounds: how long to wait for the killed to be re-parented and reaped."""
EXIT_NOT_RUN = 127


class Family:
    """The command's shell and everything below the supervisor; the shell's wait status once reaped."""

    def __init__(self, shell: int) -> None:
        self.shell = shell
        self.status: int | None = None

    def reap(self) -> None:
        """Reap every child that has ended (orphans re-parented here included), recording the shell's status."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.shell:
                self.status = status

    def end(self, grace_s: float) -> None:
        """SIGTERM every live descendant, then SIGKILL them `grace_s` later until none is left."""
        for pid in descendants():
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while descendants() and (left := deadline - time.monotonic()) > 0:
            signal.sigtimedwait({signal.SIGCHLD}, left)
            self.reap()
        while found := descendants():
            for pid in found:
                _signal(pid, signal.SIGKILL)
            signal.sigtimedwait({signal.SIGCHLD}, _ROUND_S)
            self.reap()
        self.reap()


def descendants() -> list[int]:
    """The live (not zombie) processes below this one, parents before children, from a scan of /proc."""
    children: dict[int, list[int]] = {}
    zombies: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # after "pid (comm) ": the name may hold anything
        pid, state, ppid = int(entry), fields[0], int(fields[1])
        children.setdefault(ppid, []).append(pid)
        if state == b"Z":
            zombies.add(pid)
    found: list[int] = []
    queue = [os.getpid()]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return [pid for pid in found if pid not in zombies]


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)


def _prctl(libc: ctypes.CDLL, option: int, value: int) -> None:
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _spawn(libc: ctypes.CDLL, command: list[str]) -> int:
    supervisor = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    try:  # the child: its own group, death with the supervisor, default signals, then the command
        os.setpgid(0, 0)
        _prctl(libc, PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != supervisor:
            os._exit(EXIT_NOT_RUN)
        for signum in _RESTORED:
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set[int]())
        os.execv(command[0], command)
    except BaseException as exc:  # noqa: BLE001 - whatever happened, the child must not return into the supervisor
        with contextlib.suppress(BaseException):
            os.write(2, f"cannot run {command[0]}: {exc}\n".encode())
        os._exit(EXIT_NOT_RUN)


def _exit_as(status: int | None) -> NoReturn:
    """Exit as the command did: its exit code, or killed by its signal (without a core dump)."""
    if status is None or os.WIFSIGNALED(status):
        signum = signal.SIGKILL if status is None else os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        with contextlib.suppress(OSError, ValueError):
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set[int]())
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)
    os._exit(os.waitstatus_to_exitcode(status))


def main(argv: list[str]) -> NoReturn:
    server, grace_s, command = int(argv[1]), float(argv[2]), argv[3:]
    libc = ctypes.CDLL(None, use_errno=True)
    signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
    _prctl(libc, PR_SET_CHILD_SUBREAPER, 1)
    _prctl(libc, PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != server:  # the server died before the parent-death signal was asked for
        os._exit(128 + signal.SIGTERM)
    family = Family(_spawn(libc, command))
    while family.status is None:
        if signal.sigwaitinfo(WATCHED).si_signo in STOP_SIGNALS:
            break
        family.reap()
    family.end(grace_s)
    _exit_as(family.status)


if __name__ == "__main__":
    main(sys.argv)
