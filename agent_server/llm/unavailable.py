"""The stand-in provider when no usable model is configured: every call fails saying how to fix it."""

from __future__ import annotations

from agent_server.errors import ModelError
from agent_server.llm.base import ModelRequest, ModelResponse, RetryCallback, TextCallback

CONFIGURE = (
    "configure a model instead: --llm openai:MODEL (with OPENAI_API_KEY and/or OPENAI_BASE_URL), "
    "--llm anthropic:MODEL (with ANTHROPIC_API_KEY), "
    "or --llm script:PATH for a scripted model"
)
NO_MODEL = "no model is configured and the client does not lend its own (MCP sampling); " + CONFIGURE


class UnavailableLLM:
    name = "none"

    def __init__(self, reason: str = NO_MODEL) -> None:
        self.reason = reason

    async def complete(
        self, request: ModelRequest, *, on_text: TextCallback | None = None, on_retry: RetryCallback | None = None
    ) -> ModelResponse:
        raise ModelError(self.reason)
