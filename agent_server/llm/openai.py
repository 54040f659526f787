"""`OpenAIChatLLM`: any OpenAI-compatible Chat Completions endpoint over httpx (`--llm openai:MODEL`).

One `complete()` is one `POST {base_url}/chat/completions`, retried as a whole when it fails in a
way that may pass: HTTP 408/409/429/5xx, connection errors, timeouts, a broken stream, or a
stream that ends before `data: [DONE]` (even when a `finish_reason` arrived). 400/401/403/404/422
and other 4xx fail at once. Every failure is a `ModelError` whose message names the problem, the
HTTP status and the server's own error text; the API key never appears in any message, log line
or repr.

Streaming (the default) sends text deltas to `on_text` as they arrive; without streaming, the
whole text goes to `on_text` once, after the response is read. When an attempt fails after
streaming some text and is retried, that text is discarded: the `ModelResponse` holds only the
successful attempt's text, but the caller has already seen the discarded deltas. `on_retry` (a
constructor argument) is called before each retry so the caller can say so.
"""

from __future__ import annotations

import json
import logging
import random
from contextlib import aclosing
from typing import Any

import anyio
import httpx

from agent_server.errors import ConfigError, ModelError
from agent_server.llm._openai_wire import (
    Completion,
    StreamAssembler,
    build_body,
    error_text,
    obj,
    parse_completion,
    retry_after_s,
)
from agent_server.llm._sse import iter_sse_data
from agent_server.llm.base import ModelRequest, ModelResponse, RetryCallback, TextCallback
from agent_server.redaction import redact_logger
from agent_server.settings import OpenAIOptions

logger = logging.getLogger(__name__)


RETRYABLE_STATUS = frozenset({408, 409, 429})
"""Besides every 5xx; the same set the OpenAI SDK retries."""

_PROBLEMS = {
    400: "request rejected",
    401: "authentication failed: check OPENAI_API_KEY",
    403: "authentication failed: check OPENAI_API_KEY",
    404: "unknown model or endpoint",
    422: "request rejected",
    429: "rate limited",
}


class _Secret:
    """The API key: `repr`/`str` never show it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "'***'"

    __str__ = __repr__


class _AttemptFailed(Exception):
    """One attempt failed; `complete` decides whether to retry. Messages are already redacted."""

    def __init__(self, message: str, *, retryable: bool, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after


class OpenAIChatLLM:
    """An `LLMClient` for an OpenAI-compatible Chat Completions API (OpenAI, vLLM, llama.cpp, Ollama...)."""

    name = "openai"

    def __init__(
        self,
        options: OpenAIOptions,
        *,
        api_key: str | None,
        model: str,
        http_client: httpx.AsyncClient | None = None,
        on_retry: RetryCallback | None = None,
    ) -> None:
        """Configure the client; nothing is sent until `complete`.

        Args:
            options: base URL, streaming, timeouts, retry policy and the price table.
            api_key: sent as `Authorization: Bearer ...` when given (local servers need none).
            model: the model used when a request does not name one.
            http_client: a shared client (not closed by `aclose`); by default the provider owns one.
            on_retry: awaited as `on_retry(failed_attempt, reason)` before each retry.

        Raises:
            ConfigError: `options.base_url` is not an http(s) URL.
        """
        self.options = options
        self.model = model
        self._key = _Secret(api_key) if api_key else None
        self._url = _endpoint(options.base_url)
        self._shown_url = self._redact(f"{self._url.scheme}://{self._url.netloc.decode()}{self._url.path}")
        # httpx logs each request's full URL at INFO: credentials in the base URL (user:password@, ?key=) too.
        redact_logger("httpx", [api_key] if api_key else [])
        self._timeout = httpx.Timeout(
            connect=options.connect_timeout_s,
            read=options.read_timeout_s,
            write=options.read_timeout_s,
            pool=options.connect_timeout_s,
        )
        self._client = httpx.AsyncClient(timeout=self._timeout) if http_client is None else http_client
        self._owns_client = http_client is None
        self._on_retry = on_retry

    def __repr__(self) -> str:
        key = "set" if self._key else "none"
        return f"OpenAIChatLLM(url={self._shown_url!r}, model={self.model!r}, api_key={key})"

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it."""
        if self._owns_client:
            await self._client.aclose()

    async def complete(
        self, request: ModelRequest, *, on_text: TextCallback | None = None, on_retry: RetryCallback | None = None
    ) -> ModelResponse:
        """Sample the model once, retrying per `options` (see the module docstring).

        Raises:
            ModelError: a non-retryable failure, or the last retryable one after `max_attempts`.
        """
        model = request.model or self.model
        body = build_body(request, model=model, stream=self.options.stream)
        logger.debug("openai: POST %s model=%s messages=%d", self._shown_url, model, len(request.messages))
        attempt = 1
        while True:
            try:
                completion = await self._attempt(body, model, on_text)
                return completion.to_response(model, self.options.prices)
            except _AttemptFailed as failure:
                if not failure.retryable or attempt >= self.options.max_attempts:
                    raise self._final_error(failure, attempt) from failure.__cause__
                await self._before_retry(attempt, failure, on_retry or self._on_retry)
            attempt += 1

    async def _attempt(self, body: dict[str, Any], model: str, on_text: TextCallback | None) -> Completion:
        try:
            async with self._client.stream(
                "POST", self._url, json=body, headers=self._headers(), timeout=self._timeout
            ) as response:
                await self._check_status(response, model)
                if self.options.stream and not _is_json(response):
                    return await self._read_stream(response, on_text)
                completion = self._parse_whole(await response.aread())
        except httpx.HTTPError as exc:
            raise self._transport_failure(exc) from exc
        if on_text is not None and completion.text:  # a whole answer arrives as one delta
            await on_text("".join(completion.text))
        return completion

    async def _read_stream(self, response: httpx.Response, on_text: TextCallback | None) -> Completion:
        assembler = StreamAssembler()
        done = False
        try:
            async with aclosing(iter_sse_data(response.aiter_lines())) as events:
                async for data in events:
                    if done:  # drain the rest so the connection can be reused
                        continue
                    if data.strip() == "[DONE]":
                        done = True
                        continue
                    text = assembler.feed(self._parse_chunk(data))
                    if text and on_text is not None:
                        await on_text(text)
        except httpx.HTTPError:
            if not done:
                raise
        if not done:
            raise self._failed(f"stream from {self._shown_url} ended before data: [DONE] (truncated)", True)
        return assembler.completion

    def _parse_chunk(self, data: str) -> dict[str, Any]:
        try:
            chunk = obj(json.loads(data))
        except ValueError:
            raise self._failed(f"malformed stream chunk from {self._shown_url}: {data[:200]!r}", True) from None
        if chunk.get("error") is not None and not chunk.get("choices"):
            text = error_text(data.encode())
            raise self._failed(f"server error in stream from {self._shown_url}: {text}", True)
        return chunk

    def _parse_whole(self, body: bytes) -> Completion:
        try:
            data = obj(json.loads(body))
        except ValueError:
            raise self._failed(f"response from {self._shown_url} is not JSON: {error_text(body)}", True) from None
        if data.get("error") is not None and not data.get("choices"):
            raise self._failed(f"server error from {self._shown_url}: {error_text(body)}", True)
        return parse_completion(data)

    async def _check_status(self, response: httpx.Response, model: str) -> None:
        status = response.status_code
        if status < 300:
            return
        await response.aread()
        retryable = status in RETRYABLE_STATUS or status >= 500
        problem = _PROBLEMS.get(status) or ("server error" if status >= 500 else "request failed")
        if status == 404:
            problem += f" (model {model!r})"
        message = f"{problem} (HTTP {status} from {self._shown_url}): {error_text(response.content)}"
        retry_after = retry_after_s(response.headers) if retryable else None
        raise self._failed(message, retryable, status=status, retry_after=retry_after)

    def _transport_failure(self, exc: httpx.HTTPError) -> _AttemptFailed:
        detail = str(exc) or type(exc).__name__
        url = self._shown_url
        if isinstance(exc, httpx.ConnectTimeout):
            return self._failed(f"connecting to {url} timed out after {self.options.connect_timeout_s} s", True)
        if isinstance(exc, httpx.ReadTimeout):
            return self._failed(f"read timeout: no data from {url} for {self.options.read_timeout_s} s", True)
        if isinstance(exc, httpx.ConnectError):
            return self._failed(f"cannot connect to {url}: {detail}", True)
        if isinstance(exc, httpx.TimeoutException | httpx.NetworkError | httpx.RemoteProtocolError):
            return self._failed(f"connection to {url} failed ({type(exc).__name__}): {detail}", True)
        return self._failed(f"request to {url} failed ({type(exc).__name__}): {detail}", False)

    def _failed(
        self, message: str, retryable: bool, *, status: int | None = None, retry_after: float | None = None
    ) -> _AttemptFailed:
        return _AttemptFailed(self._redact(message), retryable=retryable, status=status, retry_after=retry_after)

    def _final_error(self, failure: _AttemptFailed, attempt: int) -> ModelError:
        message = failure.message
        if failure.retryable:
            message += f" (gave up after {attempt} attempt{'s' if attempt != 1 else ''})"
        return ModelError(message, retryable=failure.retryable, status=failure.status)

    async def _before_retry(self, attempt: int, failure: _AttemptFailed, on_retry: RetryCallback | None) -> None:
        options = self.options
        if failure.retry_after is not None:
            delay = min(failure.retry_after, options.retry_after_max_s)
        else:
            delay = random.uniform(0, min(options.backoff_max_s, options.backoff_base_s * 2 ** (attempt - 1)))
        logger.warning(
            "openai: attempt %d of %d failed, retrying in %.2f s: %s",
            attempt,
            options.max_attempts,
            delay,
            failure.message,
        )
        if on_retry is not None:
            await on_retry(attempt, failure.message)
        await anyio.sleep(delay)

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream" if self.options.stream else "application/json"}
        if self._key is not None:
            headers["Authorization"] = f"Bearer {self._key.reveal()}"
        return headers

    def _redact(self, text: str) -> str:
        return text.replace(self._key.reveal(), "***") if self._key is not None else text


def _is_json(response: httpx.Response) -> bool:
    """A server that ignored `stream: true` and answered with one JSON object."""
    return response.headers.get("content-type", "").startswith("application/json")


def _endpoint(base_url: str) -> httpx.URL:
    """`{base_url}/chat/completions` (a trailing slash and any query kept in place).

    Raises:
        ConfigError: not an http(s) URL with a host.
    """
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL as exc:
        raise ConfigError(f"invalid OpenAI base URL: {exc}") from None
    if url.scheme not in {"http", "https"} or not url.host:
        raise ConfigError(
            "the OpenAI base URL must be an http:// or https:// URL with a host, such as http://127.0.0.1:8080/v1"
        )
    return url.copy_with(path=url.path.rstrip("/") + "/chat/completions")
