"""Drive `agent-server --protocol acp` over real stdio with the library's own client side.

Nothing here imports agent_server: these tests see the agent only through its process boundary.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from acp import spawn_agent_process
from acp.client.connection import ClientSideConnection
from acp.connection import StreamEvent
from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

from tests.subprocess.helpers import ServerDirs, server_env

WAIT_S = 20
ENDED = ("completed", "failed")

READ_ROUND: list[dict[str, Any]] = [
    {"content": "Let me look.", "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
    {
        "expect_contains": "pomegranate",
        "content": "The word is pomegranate.",
        "usage": {"prompt_tokens": 10, "completion_tokens": 3},
    },
]
"""One tool round that reads `WORKSPACE_FILE`, then an answer that needs what it read."""


@dataclass
class RecordingClient:
    """An ACP client that records every `session/update` and answers permission requests with `choice`."""

    updates: list[tuple[str, Any]] = field(default_factory=list[tuple[str, Any]])
    permission_requests: list[Any] = field(default_factory=list[Any])
    choice: str | None = "allow_once"
    process: Any = None
    """The agent's process (an `asyncio.subprocess.Process`), set by `spawned`."""
    _changed: anyio.Event = field(default_factory=anyio.Event)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self._changed.set()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append((session_id, tool_call, options))
        if self.choice is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=self.choice))

    def on_connect(self, conn: Any) -> None:
        pass

    def kinds(self, session_id: str) -> list[str]:
        return [u.session_update for s, u in self.updates if s == session_id]

    async def wait_until(self, condition: Callable[[], bool], timeout: float = WAIT_S) -> None:
        with anyio.fail_after(timeout):
            while not condition():
                self._changed = anyio.Event()
                await self._changed.wait()

    async def wait_for_kind(self, session_id: str, kind: str) -> None:
        await self.wait_until(lambda: kind in self.kinds(session_id))

    def ended(self, session_id: str | None = None) -> list[Any]:
        """The `tool_call_update`s that end a call (`completed` or `failed`), in order."""
        return [
            u
            for s, u in self.updates
            if session_id in (None, s) and u.session_update == "tool_call_update" and u.status in ENDED
        ]

    def texts(self, session_id: str, kind: str = "agent_message_chunk") -> str:
        return "".join(u.content.text for s, u in self.updates if s == session_id and u.session_update == kind)


def acp_argv(dirs: ServerDirs, responses: Sequence[dict[str, Any]], *extra: str) -> list[str]:
    return [*dirs.argv(responses), "--protocol", "acp", *extra]


@asynccontextmanager
async def spawned(
    dirs: ServerDirs,
    responses: Sequence[dict[str, Any]],
    *extra: str,
    client: RecordingClient | None = None,
    observers: Sequence[Callable[[StreamEvent], None]] = (),
) -> AsyncGenerator[tuple[ClientSideConnection, RecordingClient]]:
    """The agent process and an initialized client connection to it (`observers` see every raw message)."""
    recorder = client or RecordingClient()
    command, *args = acp_argv(dirs, responses, *extra)
    with anyio.fail_after(WAIT_S):
        async with spawn_agent_process(
            recorder,
            command,
            *args,
            env=server_env(),
            cwd=str(dirs.root),
            use_unstable_protocol=True,
            observers=list(observers),
        ) as (conn, process):
            recorder.process = process
            await conn.initialize(protocol_version=1)
            yield conn, recorder


async def full_record(dirs: ServerDirs, turn: dict[str, Any]) -> dict[str, Any]:
    """The whole stored record of a turn (`_meta.agent_server.turn` is its summary), read over MCP."""
    from mcp import Client

    from tests.subprocess.helpers import structured

    async with Client(dirs.params([], script="reader.json"), mode="auto") as client:
        return await structured(client, "turn_get", {"turn_id": turn["turn_id"], "detail": "full"})


PYTHON = sys.executable
WORKSPACE_FILE = "notes.txt"


def make_workspace(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / WORKSPACE_FILE).write_text("the secret word is pomegranate\n", encoding="utf-8")
    return path
