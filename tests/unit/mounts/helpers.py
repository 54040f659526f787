"""Shared helpers of the mounts tests: fake-server configs, a progress recorder, process checks."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from agent_server.mounts.config import MountConfig
from agent_server.mounts.toolset import MountManager
from agent_server.mounts.transport import InProcessServer

FAKES = Path(__file__).resolve().parents[2] / "fakes"
ECHO = str(FAKES / "mcp_echo.py")
SILENT = str(FAKES / "mcp_silent.py")


def in_process(name: str, **settings: Any) -> MountConfig:
    """A config for a server handed to MountManager(in_process=...): its command is never run."""
    return MountConfig(name=name, command="in-process", **settings)


def echo_stdio(name: str, *args: str, **settings: Any) -> MountConfig:
    return MountConfig(name=name, command=sys.executable, args=[ECHO, "--name", name, *args], **settings)


@asynccontextmanager
async def mounted(
    configs: Sequence[MountConfig],
    servers: Mapping[str, InProcessServer] | None = None,
    *,
    mode: str = "auto",
    start_timeout: float = 20,
    **options: Any,
) -> AsyncGenerator[MountManager]:
    """A running MountManager whose servers have all finished starting."""
    async with MountManager(configs, in_process=servers, mode=mode, **options) as manager:
        with anyio.fail_after(start_timeout):
            await manager.wait_started()
        yield manager


Update = tuple[float, float | None, str | None]


@dataclass
class Progress:
    """An `on_progress` callback recording what reaches it; `arrived` is set by the first value."""

    updates: list[tuple[float, float | None, str | None]] = field(
        default_factory=list[tuple[float, float | None, str | None]]
    )
    delay: float = 0.0
    arrived: anyio.Event = field(default_factory=anyio.Event)

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.updates.append((progress, total, message))
        self.arrived.set()
        if self.delay:
            await anyio.sleep(self.delay)


def alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie (an unreaped corpse holds no resources)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def poll_until(condition: Callable[[], bool], timeout: float = 5) -> None:
    """Wait for state another process (or a server task we hold no event of) changes. Bounded."""
    with anyio.fail_after(timeout):
        while not condition():  # noqa: ASYNC110 - nothing to wait on: the state is outside this process
            await anyio.sleep(0.01)


def written(path: Path) -> str:
    """What a fake server wrote to `path` so far ('' if nothing)."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""


async def read_pid(path: Path, timeout: float = 10) -> int:
    """The pid a fake server wrote to `path`."""
    await poll_until(lambda: bool(written(path)), timeout)
    return int(written(path))


async def wait_until_gone(pid: int, timeout: float = 5) -> None:
    await poll_until(lambda: not alive(pid), timeout)
