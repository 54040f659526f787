"""`chat {model}` spans: a model client that traces each call of the client it wraps (GenAI inference spans).

The span covers the logical call, the provider's own retries included (as the conventions ask), and is a
CLIENT span: an HTTP instrumentation of the provider's requests would nest below it. Attributes: the
operation, `gen_ai.provider.name`, `gen_ai.request.model` (the request's model, else the client's default),
`gen_ai.conversation.id` (the session), then `gen_ai.response.model`, the token usage and
`gen_ai.response.finish_reasons` (our stop reasons: `end_turn`, `tool_use`, `max_tokens`, ...); a
`ModelError` sets `error.type` to its type (`model_error`, ...). Messages only with settings `tracing.content`.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from agent_server.llm.base import LLMClient, ModelRequest, ModelResponse, RetryCallback, TextCallback
from agent_server.tracing.content import Content
from agent_server.tracing.spans import (
    CONVERSATION,
    OPERATION,
    PROVIDER,
    REQUEST_MODEL,
    provider_name,
    short,
    usage_attributes,
    watching,
)


class TracedLLM:
    """`LLMClient` tracing every `complete` of `inner`."""

    def __init__(
        self, inner: LLMClient, tracer: trace.Tracer, *, content: Content | None, provider: str | None
    ) -> None:
        self._inner = inner
        self._tracer = tracer
        self._content = content
        self._provider = provider_name(inner.name) or provider_name(provider)
        self.name = inner.name

    async def complete(
        self, request: ModelRequest, *, on_text: TextCallback | None = None, on_retry: RetryCallback | None = None
    ) -> ModelResponse:
        model = request.model or _default_model(self._inner)
        model = short(model) if model else None
        attributes: dict[str, Any] = {OPERATION: "chat", "agent_server.request.purpose": request.purpose}
        if self._provider:
            attributes[PROVIDER] = self._provider
        if model:
            attributes[REQUEST_MODEL] = model
        if request.session_id:
            attributes[CONVERSATION] = request.session_id
        if self._content is not None:
            attributes["gen_ai.input.messages"] = self._content.messages(request.messages)
        name = f"chat {model}" if model else "chat"
        with (
            self._tracer.start_as_current_span(
                name, kind=SpanKind.CLIENT, attributes=attributes, record_exception=False, set_status_on_exception=False
            ) as span,
            watching(span),
        ):
            response = await self._inner.complete(request, on_text=on_text, on_retry=on_retry)
            span.set_attributes(self._response_attributes(response))
            return response

    def _response_attributes(self, response: ModelResponse) -> dict[str, Any]:
        attributes: dict[str, Any] = dict(usage_attributes(response.usage))
        if response.model:
            attributes["gen_ai.response.model"] = short(response.model)
        if response.stop_reason:
            attributes["gen_ai.response.finish_reasons"] = [response.stop_reason]
        if self._content is not None:
            answer = self._content.answer(response.text, response.stop_reason, response.tool_calls)
            attributes["gen_ai.output.messages"] = answer
        return attributes


def _default_model(llm: LLMClient) -> str | None:
    """The model a client uses when the request names none (`model` on our HTTP clients), if it says."""
    model: object = getattr(llm, "model", None)
    return model if isinstance(model, str) and model else None
