"""The stand-in provider when no model is configured: every call fails with how to configure one."""

from __future__ import annotations

from agent_server.errors import ModelError
from agent_server.llm.base import ModelRequest, ModelResponse, TextCallback

HOW_TO = (
    "no model is configured: start agent-server with --llm script:PATH (a JSON file of scripted "
    "responses), or set `llm` in the config file"
)


class UnconfiguredLLM:
    name = "none"

    async def complete(self, request: ModelRequest, *, on_text: TextCallback | None = None) -> ModelResponse:
        raise ModelError(HOW_TO)
