"""`AnthropicLLM`: the Anthropic Messages API over httpx (`--llm anthropic:MODEL`).

One `complete()` is one `POST {base_url}/v1/messages` with `x-api-key` and `anthropic-version`; attempts,
retries (429 and 529 `overloaded_error` honour `retry-after`; 400/401/403/404 fail at once with the API's own
message), timeouts and the key's masking are `_http.py`'s. A stream is whole at `message_stop`; an `error`
event mid-stream is retried like a broken stream (an `invalid_request_error` is not). The wire format,
prompt-cache breakpoints included, is `_anthropic_wire.py`'s.

Extended thinking (`anthropic.thinking_budget_tokens`): an answer's thinking blocks (with their `signature`,
or `redacted_thinking`) come back as `ModelResponse.native`, the whole content in order; the loop keeps it on
the assistant message, and `map_messages` sends it back unchanged in the following rounds, as the API
requires within a tool-use loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from agent_server.llm._anthropic_wire import AnthropicAnswer, AnthropicAssembler, build_body, parse_message
from agent_server.llm._http import HttpLLM, endpoint
from agent_server.llm._openai_wire import obj
from agent_server.llm.base import ModelRequest, ModelResponse, RetryCallback
from agent_server.llm.prices import price_table
from agent_server.settings import AnthropicOptions, Price

NOT_RETRIED_ERRORS = frozenset(
    {"invalid_request_error", "authentication_error", "permission_error", "not_found_error", "request_too_large"}
)
"""Error types of an `error` event that sending the request again cannot fix."""


class _MessagesDecoder:
    def __init__(self, llm: AnthropicLLM) -> None:
        self._llm = llm
        self._assembler = AnthropicAssembler()

    @property
    def done(self) -> bool:
        return self._assembler.done

    def feed(self, data: str) -> str:
        event = self._llm.parse_event(data)
        if event.get("type") == "error":
            kind = obj(event.get("error")).get("type")
            failure = self._llm.server_error(data.encode(), in_stream=True)
            failure.retryable = kind not in NOT_RETRIED_ERRORS
            raise failure
        return self._assembler.feed(event)

    def has_output(self) -> bool:
        return self._assembler.answer.has_output()

    def answer(self) -> AnthropicAnswer:
        return self._assembler.finish()


class AnthropicLLM(HttpLLM[AnthropicAnswer]):
    """An `LLMClient` for the Anthropic Messages API."""

    name = "anthropic"
    settings_key = "anthropic"
    key_variable = "ANTHROPIC_API_KEY"
    stream_end = "message_stop"

    def __init__(
        self,
        options: AnthropicOptions,
        *,
        api_key: str | None,
        model: str,
        http_client: httpx.AsyncClient | None = None,
        on_retry: RetryCallback | None = None,
        prices: Mapping[str, Price] | None = None,
    ) -> None:
        """Configure the client; nothing is sent until `complete`.

        Raises:
            ConfigError: `options.base_url` is not an http(s) URL.
        """
        self.options = options
        url = endpoint(options.base_url, "/v1/messages", example="https://api.anthropic.com")
        super().__init__(
            options,
            url=url,
            api_key=api_key,
            model=model,
            prices=price_table() if prices is None else prices,
            http_client=http_client,
            on_retry=on_retry,
        )

    def build_body(self, request: ModelRequest, model: str) -> dict[str, Any]:
        return build_body(request, model=model, options=self.options)

    def with_stream(self, body: dict[str, Any], stream: bool) -> dict[str, Any]:
        return {**body, "stream": stream}

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"x-api-key": key}

    def extra_headers(self) -> dict[str, str]:
        return {"anthropic-version": self.options.version}

    def decoder(self) -> _MessagesDecoder:
        return _MessagesDecoder(self)

    def parse_whole(self, data: dict[str, Any], body: bytes) -> AnthropicAnswer:
        if data.get("type") == "error":
            failure = self.server_error(body, in_stream=False)
            failure.retryable = obj(data.get("error")).get("type") not in NOT_RETRIED_ERRORS
            raise failure
        return parse_message(data)

    def to_response(self, answer: AnthropicAnswer, model: str, request: ModelRequest) -> ModelResponse:
        return answer.to_response(model, self.prices)
