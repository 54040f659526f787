"""In-memory end-to-end harness: an SDK `Client` connected to `create_server` with a scripted model."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client import ClientExtension, NotificationBinding
from pydantic import BaseModel, ConfigDict

from agent_server.llm.scripted import ScriptedLLM
from agent_server.server.app import create_server
from agent_server.server.streaming import EVENT_METHOD, EVENTS_EXTENSION
from agent_server.settings import Settings

MODES = ["auto", "legacy"]


class EventParams(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str


class EventRecorder(ClientExtension):
    """Opts in to full-fidelity events and records them. The SDK client hands bound notifications to their
    handler in a task of its own, so a call's result can arrive before its last events are recorded: a test
    of the whole stream waits for the turn's `done` (`until_done`)."""

    identifier = EVENTS_EXTENSION

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._done: defaultdict[str, anyio.Event] = defaultdict(anyio.Event)

    async def until_done(self, turn_id: str) -> None:
        """Return once the `done` event of `turn_id` is recorded."""
        await self._done[turn_id].wait()

    def notifications(self) -> list[NotificationBinding[Any]]:
        async def on_event(params: EventParams) -> None:
            event = params.model_dump()
            self.events.append(event)
            if event["type"] == "done":
                self._done[event["turn_id"]].set()

        return [NotificationBinding(method=EVENT_METHOD, params_type=EventParams, handler=on_event)]


@dataclass
class Progress:
    updates: list[tuple[float, float | None, str | None]] = field(default_factory=list)

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.updates.append((progress, total, message))

    @property
    def messages(self) -> list[str]:
        return [m or "" for _, _, m in self.updates]


@dataclass
class Harness:
    client: Client
    llm: ScriptedLLM
    settings: Settings
    events: EventRecorder

    @property
    def workspace(self) -> Path:
        return self.settings.workspace

    async def call(self, tool: str, arguments: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        return await self.client.call_tool(tool, arguments or {}, **kwargs)


def make_settings(tmp_path: Path, **overrides: Any) -> Settings:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return Settings(workspace=workspace, state_dir=tmp_path / "state", **overrides)


@asynccontextmanager
async def connect(
    tmp_path: Path,
    responses: Sequence[dict[str, Any]] = (),
    *,
    mode: str,
    settings: Settings | None = None,
    timeout: float = 10,
    in_process_mounts: dict[str, Any] | None = None,
    elicitation_callback: Any = None,
    message_handler: Any = None,
    **overrides: Any,
) -> AsyncIterator[Harness]:
    """Connect a client to a fresh server; the whole block is bounded by `timeout` seconds."""
    settings = settings or make_settings(tmp_path, **overrides)
    llm = ScriptedLLM(list(responses))
    recorder = EventRecorder()
    server = create_server(settings, llm=llm, in_process_mounts=in_process_mounts)
    with anyio.fail_after(timeout):
        async with Client(
            server,
            mode=mode,
            extensions=[recorder],
            elicitation_callback=elicitation_callback,
            message_handler=message_handler,
        ) as client:
            yield Harness(client=client, llm=llm, settings=settings, events=recorder)
