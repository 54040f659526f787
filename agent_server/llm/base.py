"""The model boundary: what the loop needs from any LLM provider.

A provider turns a `ModelRequest` (messages in the normalised shape of `agent_server.types`,
tool specs, an optional model override) into one `ModelResponse`. Text may be streamed
through `on_text` as it arrives; the response still carries the whole text. Failures raise
`agent_server.errors.ModelError`; cancellation propagates.
"""

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from agent_server.types import Message, NativeContent, StopReason, ToolCall, ToolSpec, Usage

TextCallback = Callable[[str], Awaitable[None]]
RetryCallback = Callable[[int, str], Awaitable[None]]
"""`on_retry(failed_attempt, reason)`: an attempt failed and another follows. `reason` says why and what
happens next (how long the wait is, whether text it streamed is discarded), ready to show to a user."""


class ModelRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list[ToolSpec])
    model: str | None = None
    purpose: str = "turn"
    """`turn` for the agent loop, `compaction` for summaries."""
    session_id: str | None = None
    """The session the call serves: providers with a prompt cache route one session's calls to one cache."""
    output_schema: dict[str, Any] | None = None
    """The JSON Schema the final answer must be valid against (checked by the loop): a provider with native
    structured output asks for it (OpenAI's `response_format`); the others rely on the system prompt's words."""


class ModelResponse(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list[ToolCall])
    reasoning: str | None = None
    usage: Usage = Field(default_factory=Usage)
    model: str | None = None
    tool_calls_from_text: bool = False
    """The tool calls were recovered from JSON the model wrote as its answer's text (`text` is then empty)."""
    stop_reason: StopReason | None = None
    """Why the model stopped, mapped from the provider's own word (None when it gave none, or an unknown one)."""
    native: NativeContent | None = None
    """The answer as its API wrote it, when it carries parts only that API reads back (thinking blocks,
    encrypted reasoning items): the loop keeps it on the assistant message, for the rounds that follow."""


class LLMClient(Protocol):
    """One model provider."""

    name: str

    async def complete(
        self, request: ModelRequest, *, on_text: TextCallback | None = None, on_retry: RetryCallback | None = None
    ) -> ModelResponse:
        """Sample the model once.

        Raises:
            ModelError: the call failed (after the provider's own retries).
        """
        ...
