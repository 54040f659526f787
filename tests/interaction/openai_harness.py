"""An in-memory client on `create_server` whose model is the real OpenAI provider and a fake HTTP server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from agent_server.llm.openai import OpenAIChatLLM
from agent_server.server.app import create_server
from agent_server.settings import OpenAIOptions
from tests.fakes.openai_server import FakeOpenAIServer, Quirks
from tests.interaction.harness import EventRecorder, Progress, make_settings

FAST = {"backoff_base_s": 0.0, "backoff_max_s": 0.0}


@dataclass
class Local:
    client: Client
    model: FakeOpenAIServer
    events: EventRecorder
    workspace: Path

    async def turn(self, prompt: str, **arguments: Any) -> tuple[dict[str, Any], Progress]:
        progress = Progress()
        arguments = {"prompt": prompt, "detail": "full", **arguments}  # the tests read the tool rounds
        result = await self.client.call_tool("run_turn", arguments, progress_callback=progress)
        return result.structured_content or {}, progress

    def statuses(self) -> list[str]:
        return [e["message"] for e in self.events.events if e["type"] == "status"]


@asynccontextmanager
async def local(
    tmp_path: Path,
    mode: str,
    quirks: Quirks | None = None,
    openai: dict[str, Any] | None = None,
    in_process_mounts: dict[str, Any] | None = None,
    **settings: Any,
) -> AsyncIterator[Local]:
    """A server on `tmp_path` whose model is the real OpenAI provider talking to a fake server."""
    async with FakeOpenAIServer(quirks) as model:
        options = OpenAIOptions(base_url=model.base_url, **{**FAST, **(openai or {})})
        config = make_settings(tmp_path, openai=options, **settings)
        llm = OpenAIChatLLM(options, api_key=None, model="local")
        recorder = EventRecorder()
        try:
            with anyio.fail_after(20):
                async with Client(
                    create_server(config, llm=llm, in_process_mounts=in_process_mounts),
                    mode=mode,
                    extensions=[recorder],
                ) as client:
                    yield Local(client, model, recorder, config.workspace)
        finally:
            await llm.aclose()
