"""`OpenAIChatLLM`: any OpenAI-compatible Chat Completions endpoint over httpx (`--llm openai:MODEL`).

One `complete()` is one `POST {base_url}/chat/completions`, retried as a whole when it fails in a
way that may pass: HTTP 408/409/429/5xx, connection errors, timeouts, a broken stream, or a
stream that ends before `data: [DONE]` (even when a `finish_reason` arrived). 400/401/403/404/422
and other 4xx fail at once, and so does a 5xx whose body reads as request validation (a server
that answers a malformed request with 500 answers its retry the same way). Every failure is a
`ModelError` whose message names the problem, the HTTP status and the server's own error text
(its middle cut when long); the API key never appears in any message, log line or repr: it is
masked on the whole text before anything is cut.

Streaming (the default) sends text deltas to `on_text` as they arrive; without streaming, the
whole text goes to `on_text` once, after the response is read. A stream that breaks after HTTP 200
before any delta (servers that cannot stream tool calls) is retried once without streaming; when
that passes for a request with tools, this client sends its later requests with tools unstreamed. A
broken stream's connection is closed, not left in the pool to fail the next request. When an attempt
fails after streaming some text and is retried, that text is discarded: the `ModelResponse` holds
only the successful attempt's text, but the caller has already seen the discarded deltas.
`on_retry` (a constructor argument, or per call) is called before each retry with a reason that
says what happens next, including whether streamed text is discarded.

With `parse_text_tool_calls = "auto"`, an answer that consists only of tool calls written as JSON
text becomes those tool calls (see `_text_tool_calls.py`); `ModelResponse.tool_calls_from_text`
tells the caller.
"""

from __future__ import annotations

import json
import logging
import random
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from agent_server.errors import ConfigError, ModelError
from agent_server.llm._endpoint import is_local_host
from agent_server.llm._openai_wire import (
    CHUNK_TEXT_MAX,
    Completion,
    StreamAssembler,
    build_body,
    cut_middle,
    error_text,
    is_validation_error,
    obj,
    parse_completion,
    retry_after_s,
    with_stream,
)
from agent_server.llm._secret import Secret, StreamMask
from agent_server.llm._sse import iter_sse_data
from agent_server.llm._text_tool_calls import recover_tool_calls
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


class _AttemptFailed(Exception):
    """One attempt failed; `complete` decides whether to retry. Messages are already redacted."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
        timed_out: bool = False,
    ):
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        self.timed_out = timed_out
        """A read timeout: the server may still be working on the request (never a reason to stop streaming)."""


@dataclass
class _Seen:
    """What one attempt got before it failed: it decides the fallback and what the retry message says."""

    streaming: bool = False
    """HTTP 200 with an event stream: a failure from here on is a broken stream."""
    output: bool = False
    """Any text, reasoning or tool-call delta arrived."""
    text: bool = False
    """Text reached `on_text` (and is discarded if the attempt fails)."""


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
        self._key = Secret(api_key) if api_key else None
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
        retry_timeouts = options.retry_read_timeout
        self._retry_read_timeout = not is_local_host(self._url.host) if retry_timeouts is None else retry_timeouts
        self._tools_unstreamed = False
        """Set once a request with tools needed the fallback: later ones are sent without streaming."""

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
        body = build_body(request, model=model, options=self.options)
        if request.tools and self._tools_unstreamed:
            body = with_stream(body, False)
        notify = on_retry or self._on_retry
        logger.debug("openai: POST %s model=%s messages=%d", self._shown_url, model, len(request.messages))
        attempt, fell_back = 1, False
        while True:
            seen = _Seen()
            try:
                completion = await self._attempt(body, model, on_text, seen)
                if fell_back and request.tools:
                    self._remember_unstreamed_tools()
                return self._response(completion, model, request)
            except _AttemptFailed as failure:
                if seen.streaming and not seen.output and body["stream"] and not failure.timed_out:
                    body, fell_back = with_stream(body, False), True
                    await self._fall_back(attempt, failure, notify)
                elif not failure.retryable or attempt >= self.options.max_attempts:
                    raise self._final_error(failure, attempt) from failure.__cause__
                else:
                    await self._before_retry(attempt, failure, seen, notify)
            attempt += 1

    def _response(self, completion: Completion, model: str, request: ModelRequest) -> ModelResponse:
        response = completion.to_response(model, self.options.prices)
        if self._key is not None:
            reasoning = self._key.mask(response.reasoning) if response.reasoning else response.reasoning
            response = response.model_copy(update={"text": self._key.mask(response.text), "reasoning": reasoning})
        if self.options.parse_text_tool_calls == "auto" and not response.tool_calls and request.tools:
            calls = recover_tool_calls(response.text, {tool.name for tool in request.tools})
            if calls:
                # The calls replace the text they were written in: the history then holds them once, as calls.
                update = {"text": "", "tool_calls": calls, "tool_calls_from_text": True}
                response = response.model_copy(update=update)
        return response

    async def _attempt(self, body: dict[str, Any], model: str, on_text: TextCallback | None, seen: _Seen) -> Completion:
        try:
            async with self._client.stream(
                "POST", self._url, json=body, headers=self._headers(body["stream"]), timeout=self._timeout
            ) as response:
                await self._check_status(response, model)
                if body["stream"] and not _is_json(response):
                    seen.streaming = True
                    try:
                        return await self._read_stream(response, on_text, seen)
                    except (_AttemptFailed, httpx.HTTPError):
                        await _drop_connection(response)
                        raise
                completion = self._parse_whole(await response.aread())
        except httpx.HTTPError as exc:
            raise self._transport_failure(exc) from exc
        if on_text is not None and completion.text:  # a whole answer arrives as one delta
            await on_text(self._redact("".join(completion.text)))
        return completion

    async def _read_stream(self, response: httpx.Response, on_text: TextCallback | None, seen: _Seen) -> Completion:
        assembler = StreamAssembler()
        mask = StreamMask(self._key)
        done = False
        try:
            async with aclosing(iter_sse_data(response.aiter_lines())) as events:
                async for data in events:
                    if done:  # drain the rest so the connection can be reused
                        continue
                    if data.strip() == "[DONE]":
                        done = True
                        continue
                    text = mask.feed(assembler.feed(self._parse_chunk(data)))
                    seen.output = seen.output or assembler.completion.has_output()
                    if text and on_text is not None:
                        seen.text = True
                        await on_text(text)
        except httpx.HTTPError:
            if not done:
                raise
        if not done:
            raise self._failed(f"stream from {self._shown_url} ended before data: [DONE] (truncated)", True)
        rest = mask.flush()
        if rest and on_text is not None:
            await on_text(rest)
        return assembler.completion

    def _parse_chunk(self, data: str) -> dict[str, Any]:
        try:
            chunk = obj(json.loads(data))
        except ValueError:
            quoted = cut_middle(self._redact_fragments(data), CHUNK_TEXT_MAX)
            raise self._failed(f"malformed stream chunk from {self._shown_url}: {quoted!r}", True) from None
        if chunk.get("error") is not None and not chunk.get("choices"):
            text = error_text(data.encode(), self._redact_fragments)
            raise self._failed(f"server error in stream from {self._shown_url}: {text}", True)
        return chunk

    def _parse_whole(self, body: bytes) -> Completion:
        try:
            data = obj(json.loads(body))
        except ValueError:
            text = error_text(body, self._redact_fragments)
            raise self._failed(f"response from {self._shown_url} is not JSON: {text}", True) from None
        if data.get("error") is not None and not data.get("choices"):
            text = error_text(body, self._redact_fragments)
            raise self._failed(f"server error from {self._shown_url}: {text}", not is_validation_error(text))
        return parse_completion(data)

    async def _check_status(self, response: httpx.Response, model: str) -> None:
        status = response.status_code
        if status < 300:
            return
        await response.aread()
        text = error_text(response.content, self._redact_fragments)
        retryable = status in RETRYABLE_STATUS or (status >= 500 and not is_validation_error(text))
        problem = _PROBLEMS.get(status) or ("server error" if status >= 500 else "request failed")
        if status == 404:
            problem += f" (model {model!r})"
        elif status >= 500 and not retryable:
            problem += ", the request was judged invalid, not retried"
        message = f"{problem} (HTTP {status} from {self._shown_url}): {text}"
        retry_after = retry_after_s(response.headers) if retryable else None
        raise self._failed(message, retryable, status=status, retry_after=retry_after)

    def _transport_failure(self, exc: httpx.HTTPError) -> _AttemptFailed:
        detail = str(exc) or type(exc).__name__
        url = self._shown_url
        if isinstance(exc, httpx.ConnectTimeout):
            return self._failed(f"connecting to {url} timed out after {self.options.connect_timeout_s} s", True)
        if isinstance(exc, httpx.ReadTimeout):
            return self._read_timeout()
        if isinstance(exc, httpx.ConnectError):
            return self._failed(f"cannot connect to {url}: {detail}", True)
        if isinstance(exc, httpx.TimeoutException | httpx.NetworkError | httpx.RemoteProtocolError):
            return self._failed(f"connection to {url} failed ({type(exc).__name__}): {detail}", True)
        return self._failed(f"request to {url} failed ({type(exc).__name__}): {detail}", False)

    def _read_timeout(self) -> _AttemptFailed:
        message = f"read timeout: no data from {self._shown_url} for {self.options.read_timeout_s} s"
        if not self._retry_read_timeout:
            message += (
                "; not retried: a local server is likely still busy with this request and would queue a retry "
                "behind it (raise openai.read_timeout_s for a slow model, or set openai.retry_read_timeout: true)"
            )
        failure = self._failed(message, self._retry_read_timeout)
        failure.timed_out = True
        return failure

    def _failed(
        self, message: str, retryable: bool, *, status: int | None = None, retry_after: float | None = None
    ) -> _AttemptFailed:
        return _AttemptFailed(self._redact(message), retryable=retryable, status=status, retry_after=retry_after)

    def _final_error(self, failure: _AttemptFailed, attempt: int) -> ModelError:
        message = failure.message
        if failure.retryable:
            message += f" (gave up after {attempt} attempt{'s' if attempt != 1 else ''})"
        return ModelError(message, retryable=failure.retryable, status=failure.status)

    def _remember_unstreamed_tools(self) -> None:
        if not self._tools_unstreamed:
            self._tools_unstreamed = True
            logger.info(
                "openai: %s answered without streaming: requests with tools are no longer streamed", self._shown_url
            )

    async def _fall_back(self, attempt: int, failure: _AttemptFailed, notify: RetryCallback | None) -> None:
        reason = (
            f"{failure.message}; the stream broke before any output, retrying once without streaming "
            "(set openai.stream = false for a server that cannot stream, e.g. tool calls on llama-cpp-python)"
        )
        logger.warning("openai: attempt %d: %s", attempt, reason)
        if notify is not None:
            await notify(attempt, reason)

    async def _before_retry(
        self, attempt: int, failure: _AttemptFailed, seen: _Seen, notify: RetryCallback | None
    ) -> None:
        options = self.options
        if failure.retry_after is not None:
            delay = min(failure.retry_after, options.retry_after_max_s)
        else:
            delay = random.uniform(0, min(options.backoff_max_s, options.backoff_base_s * 2 ** (attempt - 1)))
        reason = f"{failure.message}; retrying in {delay:.2f} s (attempt {attempt + 1} of {options.max_attempts})"
        if seen.text:
            reason += "; the text it streamed is discarded"
        logger.warning("openai: attempt %d failed: %s", attempt, reason)
        if notify is not None:
            await notify(attempt, reason)
        await anyio.sleep(delay)

    def _headers(self, stream: bool) -> dict[str, str]:
        headers = {"Accept": "text/event-stream" if stream else "application/json"}
        if self._key is not None:
            headers["Authorization"] = f"Bearer {self._key.reveal()}"
        return headers

    def _redact(self, text: str) -> str:
        return self._key.mask(text) if self._key is not None else text

    def _redact_fragments(self, text: str) -> str:
        """For a server's error text: a piece of the key at its edges is masked too (a key split across
        stream chunks, or a body that ends inside one)."""
        return self._key.mask_fragments(text) if self._key is not None else text


async def _drop_connection(response: httpx.Response) -> None:
    """Close a broken stream's connection. When its body ended cleanly (only `[DONE]` missing) the pool
    would keep it for the next request, though a server whose stream broke may be done with it: the
    next request would then fail on it. A closed socket is dropped by the pool instead of reused."""
    close = getattr(response.extensions.get("network_stream"), "aclose", None)
    if close is not None:
        await close()


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
