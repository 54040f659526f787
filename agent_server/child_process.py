"""Child processes of the agent server (a mounted stdio server, a `run_command` shell): environment and end.

A child gets a minimal environment: only `MINIMAL_ENV_KEYS` are passed on from the agent server's
environment (when set), never the rest of it, so API keys (`OPENAI_API_KEY`) and other secrets stay in
this process. A child runs in its own process group (`start_new_session=True`), and ends as a group:
SIGTERM to the group, a grace period, then SIGKILL to whatever is left, so grandchildren it started go
too (a process that made its own session escapes, by design of POSIX; a `run_command` shell is further
contained by `agent_server.tools.sandbox`, so that none escapes it).
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Mapping
from contextlib import suppress

import anyio
from anyio.abc import Process

logger = logging.getLogger(__name__)

MINIMAL_ENV_KEYS = ("PATH", "HOME", "LANG", "LC_ALL", "TERM", "USER", "LOGNAME", "SHELL", "TMPDIR")
"""What a child process inherits from the agent server's environment."""
_POLL_S = 0.01


def minimal_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The `MINIMAL_ENV_KEYS` that are set in `environ`."""
    return {key: environ[key] for key in MINIMAL_ENV_KEYS if key in environ}


async def wait_exit(process: Process, timeout: float) -> bool:
    """Wait at most `timeout` for the child to exit; whether it did.

    Polls `returncode` (not `wait()`: on asyncio that also waits for pipe EOF, which a grandchild can hold).
    """
    with anyio.move_on_after(timeout):
        while process.returncode is None:  # noqa: ASYNC110 - nothing to wait on but the returncode
            await anyio.sleep(_POLL_S)
    return process.returncode is not None


async def terminate_group(process: Process, grace_s: float) -> None:
    """SIGTERM the child's process group, give it `grace_s` to be gone, then SIGKILL what is left.

    Returns at once when the group is already gone. The leader's pid is the group id (never
    `getpgid()`: it fails once the leader is reaped, even with live members left).
    """
    group = process.pid
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return
    except PermissionError:  # EPERM never proves the group is gone: keep waiting and escalating
        logger.warning("no permission to signal some of process group %d; waiting for it anyway", group)
    with anyio.move_on_after(grace_s):
        while _group_alive(group):
            _ = process.returncode  # reading it reaps the leader on trio; a zombie keeps the group alive
            await anyio.sleep(_POLL_S)
        return
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)


def _group_alive(group: int) -> bool:
    """Probe the group with signal 0; only ESRCH proves it is gone."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def release_pipes(process: Process) -> None:
    """Close asyncio's transport of an exited child, else asyncio warns at GC while a survivor holds a pipe."""
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        with suppress(PermissionError):
            close()
