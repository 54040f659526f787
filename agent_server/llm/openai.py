"""`OpenAIChatLLM`: any OpenAI-compatible Chat Completions endpoint over httpx (`--llm openai:MODEL`).

One `complete()` is one `POST {base_url}/chat/completions`; attempts, retries, errors and the key's masking are
`_http.py`'s (see there). What is Chat Completions' own: a stream is whole only at `data: [DONE]` (a stream that
ends before it is truncated and retried, even when a `finish_reason` arrived); an object with `error` and no
`choices` is a server error; and a stream that breaks after HTTP 200 before any delta (servers that cannot stream
tool calls) is retried once without streaming, after which requests with tools are sent unstreamed.

With `parse_text_tool_calls = "auto"`, an answer that consists only of tool calls written as JSON text becomes
those tool calls (see `_text_tool_calls.py`); `ModelResponse.tool_calls_from_text` tells the caller.
`prompt_cache_key` (the session id) routes one session's requests to one prompt cache; it is not sent to a
local endpoint, where it means nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from agent_server.llm._http import HttpLLM, endpoint
from agent_server.llm._openai_wire import Completion, StreamAssembler, build_body, parse_completion, with_stream
from agent_server.llm._text_tool_calls import recover_tool_calls
from agent_server.llm.base import ModelRequest, ModelResponse, RetryCallback
from agent_server.llm.prices import price_table
from agent_server.settings import OpenAIOptions, Price


class _ChatDecoder:
    """`chat.completion.chunk` events until `data: [DONE]`."""

    def __init__(self, llm: OpenAIChatLLM) -> None:
        self._llm = llm
        self._assembler = StreamAssembler()
        self.done = False

    def feed(self, data: str) -> str:
        if data.strip() == "[DONE]":
            self.done = True
            return ""
        chunk = self._llm.parse_event(data)
        if chunk.get("error") is not None and not chunk.get("choices"):
            raise self._llm.server_error(data.encode(), in_stream=True)
        return self._assembler.feed(chunk)

    def has_output(self) -> bool:
        return self._assembler.completion.has_output()

    def answer(self) -> Completion:
        return self._assembler.completion


class OpenAIChatLLM(HttpLLM[Completion]):
    """An `LLMClient` for an OpenAI-compatible Chat Completions API (OpenAI, vLLM, llama.cpp, Ollama...)."""

    name = "openai"
    settings_key = "openai"
    key_variable = "OPENAI_API_KEY"
    unstreamed_fallback = True
    stream_end = "data: [DONE]"

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

        Args:
            options: base URL, streaming, timeouts, retry policy and the price table.
            api_key: sent as `Authorization: Bearer ...` when given (local servers need none).
            model: the model used when a request does not name one.
            http_client: a shared client (not closed by `aclose`); by default the provider owns one.
            on_retry: awaited as `on_retry(failed_attempt, reason)` before each retry.
            prices: the price table (default: the built-in one with `options.prices` over it).

        Raises:
            ConfigError: `options.base_url` is not an http(s) URL.
        """
        self.options = options
        url = endpoint(options.base_url, "/chat/completions", example="http://127.0.0.1:8080/v1")
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
        body = build_body(request, model=model, options=self.options)
        if request.session_id and not self.is_local and "prompt_cache_key" not in self.options.extra_body:
            body["prompt_cache_key"] = request.session_id
        return body

    def with_stream(self, body: dict[str, Any], stream: bool) -> dict[str, Any]:
        return with_stream(body, stream)

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    def decoder(self) -> _ChatDecoder:
        return _ChatDecoder(self)

    def parse_whole(self, data: dict[str, Any], body: bytes) -> Completion:
        if data.get("error") is not None and not data.get("choices"):
            raise self.server_error(body, in_stream=False)
        return parse_completion(data)

    def to_response(self, answer: Completion, model: str, request: ModelRequest) -> ModelResponse:
        response = answer.to_response(model, self.prices)
        if self.options.parse_text_tool_calls == "auto" and not response.tool_calls and request.tools:
            calls = recover_tool_calls(response.text, {tool.name for tool in request.tools})
            if calls:
                # The calls replace the text they were written in: the history then holds them once, as calls.
                update = {"text": "", "tool_calls": calls, "tool_calls_from_text": True}
                response = response.model_copy(update=update)
        return response
