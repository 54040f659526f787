"""`OpenAIResponsesLLM`: the OpenAI Responses API over httpx (`--llm openai-responses:MODEL`).

Same variables and settings as Chat Completions (`OPENAI_BASE_URL`, `OPENAI_API_KEY`, the `openai` key);
requests go to `{base_url}/responses`. Attempts, retries, errors and the key's masking are `_http.py`'s. A
stream is whole at `response.completed` (or `response.incomplete`: cut at `max_output_tokens`); a
`response.failed` or `error` event is retried like a broken stream. The wire format (function tools,
`function_call`/`function_call_output` items, encrypted reasoning items carried across the rounds of a turn,
`prompt_cache_key`) is `_responses_wire.py`'s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

from agent_server.llm._http import HttpLLM, endpoint
from agent_server.llm._openai_wire import obj
from agent_server.llm._responses_wire import ResponsesAnswer, ResponsesAssembler, build_body, parse_response
from agent_server.llm.base import ModelRequest, ModelResponse, RetryCallback
from agent_server.llm.prices import price_table
from agent_server.settings import OpenAIOptions, Price

NOT_RETRIED_CODES = frozenset({"invalid_prompt", "invalid_request_error", "context_length_exceeded"})


class _ResponsesDecoder:
    def __init__(self, llm: OpenAIResponsesLLM) -> None:
        self._llm = llm
        self._assembler = ResponsesAssembler()

    @property
    def done(self) -> bool:
        return self._assembler.done

    def feed(self, data: str) -> str:
        event = self._llm.parse_event(data)
        if event.get("type") in ResponsesAssembler.FAILURES:
            error = obj(obj(event.get("response")).get("error")) or event
            failure = self._llm.server_error(json.dumps({"error": error}).encode(), in_stream=True)
            failure.retryable = error.get("code") not in NOT_RETRIED_CODES
            raise failure
        return self._assembler.feed(event)

    def has_output(self) -> bool:
        return bool(self._assembler.answer.items or self._assembler.answer.text)

    def answer(self) -> ResponsesAnswer:
        return self._assembler.answer


class OpenAIResponsesLLM(HttpLLM[ResponsesAnswer]):
    """An `LLMClient` for the OpenAI Responses API."""

    name = "openai-responses"
    settings_key = "openai"
    key_variable = "OPENAI_API_KEY"
    stream_end = "response.completed"

    def __init__(
        self,
        options: OpenAIOptions,
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
        url = endpoint(options.base_url, "/responses", example="https://api.openai.com/v1")
        super().__init__(
            options,
            url=url,
            api_key=api_key,
            model=model,
            prices=price_table(options.prices) if prices is None else prices,
            http_client=http_client,
            on_retry=on_retry,
        )

    def build_body(self, request: ModelRequest, model: str) -> dict[str, Any]:
        return build_body(request, model=model, options=self.options, cache_key=not self.is_local)

    def with_stream(self, body: dict[str, Any], stream: bool) -> dict[str, Any]:
        return {**body, "stream": stream}

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    def decoder(self) -> _ResponsesDecoder:
        return _ResponsesDecoder(self)

    def parse_whole(self, data: dict[str, Any], body: bytes) -> ResponsesAnswer:
        if data.get("error") is not None and data.get("status") in (None, "failed"):
            failure = self.server_error(body, in_stream=False)
            failure.retryable = obj(data.get("error")).get("code") not in NOT_RETRIED_CODES
            raise failure
        return parse_response(data)

    def to_response(self, answer: ResponsesAnswer, model: str, request: ModelRequest) -> ModelResponse:
        return answer.to_response(model, self.prices)
