"""Helpers for tests that run real `agent-server` processes and talk to them over stdio.

Nothing here imports agent_server: these tests see the server only through its process boundary.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parents[2]
MODES = ["auto", "legacy"]
PROTOCOL = {"auto": "2026-07-28", "legacy": "2025-11-25"}

_PASSED_ENV = ("PATH", "PYTHONPATH", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV", "SYSTEMROOT")


def server_env() -> dict[str, str]:
    """What a server process needs besides the SDK's minimal environment (which it is merged over)."""
    return {name: os.environ[name] for name in _PASSED_ENV if name in os.environ}


@dataclass
class ServerDirs:
    """A temporary layout for server processes: `workspace/`, `state/` and scripts in `root`."""

    root: Path

    @property
    def workspace(self) -> Path:
        return self.root / "ws"

    @property
    def state(self) -> Path:
        return self.root / "state"

    def write_script(self, responses: Sequence[dict[str, Any]], name: str) -> Path:
        path = self.root / name
        path.write_text(json.dumps({"responses": list(responses)}), encoding="utf-8")
        return path

    def argv(
        self, responses: Sequence[dict[str, Any]], *, script: str = "script.json", log_level: str | None = None
    ) -> list[str]:
        """The full server command line, with `responses` written to the script file `script`."""
        path = self.write_script(responses, script)
        argv = [
            sys.executable,
            "-m",
            "agent_server",
            "--workspace",
            str(self.workspace),
            "--state-dir",
            str(self.state),
        ]
        argv += ["--llm", f"script:{path}"]
        if log_level:
            argv += ["--log-level", log_level]
        return argv

    def params(self, responses: Sequence[dict[str, Any]], *, script: str = "script.json") -> StdioServerParameters:
        command, *args = self.argv(responses, script=script)
        return StdioServerParameters(command=command, args=args, env=server_env(), cwd=str(self.root))


@dataclass
class Progress:
    """A `progress_callback` that records every update; `sampling` is set at the first "sampling ..." message."""

    updates: list[tuple[float, float | None, str]] = field(default_factory=list[tuple[float, float | None, str]])
    sampling: anyio.Event = field(default_factory=anyio.Event)

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.updates.append((progress, total, message or ""))
        if (message or "").startswith("sampling"):
            self.sampling.set()

    @property
    def values(self) -> list[float]:
        return [p for p, _, _ in self.updates]

    @property
    def messages(self) -> list[str]:
        return [m for _, _, m in self.updates]


def strictly_increasing(values: Sequence[float]) -> bool:
    return all(b > a for a, b in zip(values, values[1:], strict=False))


async def wait_listening(host: str, port: int) -> None:
    """Until a server process accepts connections on `port` (poll: it is another process); bounded by the caller."""
    while True:
        try:
            stream = await anyio.connect_tcp(host, port)
        except OSError:
            await anyio.sleep(0.05)
            continue
        await stream.aclose()
        return


async def structured(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """Call a tool that must succeed; its `structuredContent`."""
    result = await client.call_tool(tool, arguments or {})
    assert result.is_error is False, (tool, result.content)
    assert result.structured_content is not None
    return result.structured_content


def statuses(session: dict[str, Any]) -> list[str]:
    return [turn["status"] for turn in session["turns"]]


async def wait_for_statuses(
    client: Client, session_id: str, expected: list[str], *, timeout: float = 5
) -> dict[str, Any]:
    """Poll `session_get` until the session's turn statuses are `expected`; the session.

    Polling is the only way to see a state change made by another process (or by a server task
    that outlives the request that started it).
    """
    session: dict[str, Any] = {}
    with anyio.fail_after(timeout):
        while True:
            session = await structured(client, "session_get", {"session_id": session_id})
            if statuses(session) == expected:
                return session
            await anyio.sleep(0.05)


@functools.cache
def load_replay() -> ModuleType:
    """`clients/raw/replay.py` as a module (clients/ is not a package)."""
    path = REPO / "clients" / "raw" / "replay.py"
    spec = importlib.util.spec_from_file_location("clients_raw_replay", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module
