"""The HTTP machinery every model API over httpx shares: attempts, retries, timeouts, errors, secrets.

A provider (Chat Completions, Anthropic Messages, OpenAI Responses) subclasses `HttpLLM` and says only what
its API says differently: the request body and headers, how a streamed answer is decoded, how a whole one is
parsed, and how the answer becomes a `ModelResponse`. The rest is decided here, once for all of them:

- One `complete()` is one POST, retried as a whole when it fails in a way that may pass: HTTP 408/409/429/5xx
  (Anthropic's 529 included), connection errors, timeouts, a broken stream, a stream that ends before its
  API's last event, an error event in the stream. Other 4xx fail at once, and so does a 5xx whose body reads
  as request validation. A server's `x-should-retry` header overrides the status.
- Waits: `retry-after-ms`/`Retry-After` honoured (capped at `retry_after_max_s`), else capped exponential
  backoff with jitter. A read timeout on a local endpoint is not retried unless `retry_read_timeout` says so
  (`_endpoint.py`): the server is still busy with the request.
- Every failure is a `ModelError` whose message names the problem, the HTTP status and the server's own error
  text (its middle cut when long). The API key never appears in a message, a log line, a repr or a response:
  it is masked on whole texts before anything is cut, across stream deltas too (`_secret.py`).
- A broken stream's connection is closed, not left in the pool to fail the next request. Text streamed by a
  failed attempt reached the caller, but the `ModelResponse` holds only the successful attempt's text;
  `on_retry` is told what happens next, and whether streamed text is discarded.
- Cancellation closes the HTTP stream at once.
"""

from __future__ import annotations

import json
import logging
import random
from abc import ABC, abstractmethod
from collections.abc import Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import anyio
import httpx

from agent_server.errors import ConfigError, ModelError
from agent_server.llm._endpoint import is_local_host
from agent_server.llm._openai_wire import error_text, is_validation_error, obj, retry_after_s
from agent_server.llm._secret import Secret, StreamMask
from agent_server.llm._sse import iter_sse_data
from agent_server.llm.base import ModelRequest, ModelResponse, RetryCallback, TextCallback
from agent_server.nesting import loads_bounded
from agent_server.redaction import redact_logger
from agent_server.settings import Price
from agent_server.types import NativeContent

logger = logging.getLogger("agent_server.llm")

RETRYABLE_STATUS = frozenset({408, 409, 429})
"""Besides every 5xx; the set the vendors' SDKs retry."""


class RetryOptions(Protocol):
    """The settings every HTTP provider has (`OpenAIOptions`, `AnthropicOptions`)."""

    @property
    def stream(self) -> bool: ...
    @property
    def connect_timeout_s(self) -> float: ...
    @property
    def read_timeout_s(self) -> float: ...
    @property
    def max_attempts(self) -> int: ...
    @property
    def backoff_base_s(self) -> float: ...
    @property
    def backoff_max_s(self) -> float: ...
    @property
    def retry_after_max_s(self) -> float: ...
    @property
    def retry_read_timeout(self) -> bool | None: ...
    @property
    def max_connections(self) -> int | None: ...
    @property
    def max_keepalive_connections(self) -> int: ...


def connection_limits(options: RetryOptions) -> httpx.Limits:
    """The pool's bounds from the settings: by default none on calls in flight (httpx's own default is 100, which
    would make the server's 101st concurrent turn wait for a connection and fail after `connect_timeout_s`)."""
    return httpx.Limits(
        max_connections=options.max_connections, max_keepalive_connections=options.max_keepalive_connections
    )


class AttemptFailed(Exception):
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
class Seen:
    """What one attempt got before it failed: it decides the fallback and what the retry message says."""

    streaming: bool = False
    """HTTP 200 with an event stream: a failure from here on is a broken stream."""
    output: bool = False
    """Any text, reasoning or tool-call delta arrived."""
    text: bool = False
    """Text reached `on_text` (and is discarded if the attempt fails)."""


class Answer(Protocol):
    def full_text(self) -> str:
        """The answer's text so far."""
        ...


A = TypeVar("A", bound=Answer)
A_co = TypeVar("A_co", bound=Answer, covariant=True)


class StreamDecoder(Protocol[A_co]):
    """Reads one streamed answer, event by event (the `data` of each SSE event)."""

    @property
    def done(self) -> bool:
        """The API's last event arrived: the answer is whole."""
        ...

    def feed(self, data: str) -> str:
        """Take one event; return its text delta ("" for none).

        Raises:
            AttemptFailed: an error event, or an event that is not what the API sends.
        """
        ...

    def has_output(self) -> bool: ...

    def answer(self) -> A_co: ...


class HttpLLM(ABC, Generic[A]):
    """An `LLMClient` over one model API; see the module docstring for what every subclass shares."""

    name: str = "http"
    settings_key: str = "openai"
    """The settings object of this provider's options, named by messages that suggest a setting."""
    key_variable: str = "the API key"
    """The environment variable of the key, named by authentication errors."""
    unstreamed_fallback: bool = False
    """A stream that breaks after HTTP 200 before any output is retried once without streaming (servers that
    cannot stream tool calls); once that passes for a request with tools, later ones are sent unstreamed."""

    def __init__(
        self,
        options: RetryOptions,
        *,
        url: httpx.URL,
        api_key: str | None,
        model: str,
        prices: Mapping[str, Price],
        http_client: httpx.AsyncClient | None = None,
        on_retry: RetryCallback | None = None,
    ) -> None:
        self.retry_options = options
        self.model = model
        self.prices = prices
        self._key = Secret(api_key) if api_key else None
        self._url = url
        self._shown_url = self._redact(f"{url.scheme}://{url.netloc.decode()}{url.path}")
        # httpx logs each request's full URL at INFO: credentials in the base URL (user:password@, ?key=) too.
        redact_logger("httpx", [api_key] if api_key else [])
        self._timeout = httpx.Timeout(
            connect=options.connect_timeout_s,
            read=options.read_timeout_s,
            write=options.read_timeout_s,
            pool=options.connect_timeout_s,
        )
        limits = connection_limits(options)
        self._client = httpx.AsyncClient(timeout=self._timeout, limits=limits) if http_client is None else http_client
        self._owns_client = http_client is None
        self._on_retry = on_retry
        retry = options.retry_read_timeout
        self._retry_read_timeout = not is_local_host(url.host) if retry is None else retry
        self._tools_unstreamed = False

    def __repr__(self) -> str:
        key = "set" if self._key else "none"
        return f"{type(self).__name__}(url={self._shown_url!r}, model={self.model!r}, api_key={key})"

    @property
    def is_local(self) -> bool:
        return is_local_host(self._url.host)

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it."""
        if self._owns_client:
            await self._client.aclose()

    # --- what each API says differently -------------------------------------------------------

    @abstractmethod
    def build_body(self, request: ModelRequest, model: str) -> dict[str, Any]:
        """The request's JSON body (`stream` set from the options)."""

    @abstractmethod
    def with_stream(self, body: dict[str, Any], stream: bool) -> dict[str, Any]:
        """`body` asking for a streamed answer or a whole one."""

    @abstractmethod
    def auth_headers(self, key: str) -> dict[str, str]:
        """The headers that carry the key."""

    def extra_headers(self) -> dict[str, str]:
        return {}

    @abstractmethod
    def decoder(self) -> StreamDecoder[A]:
        """A fresh decoder for one streamed answer."""

    @abstractmethod
    def parse_whole(self, data: dict[str, Any], body: bytes) -> A:
        """A whole (unstreamed) answer.

        Raises:
            AttemptFailed: the body is an error object.
        """

    @abstractmethod
    def to_response(self, answer: A, model: str, request: ModelRequest) -> ModelResponse:
        """The answer as a `ModelResponse` (usage priced); the key is masked afterwards."""

    def problem(self, status: int) -> str:
        """What an HTTP error status means, in a few words."""
        return {
            400: "request rejected",
            401: f"authentication failed: check {self.key_variable}",
            403: f"authentication failed: check {self.key_variable}",
            404: "unknown model or endpoint",
            413: "request too large",
            422: "request rejected",
            429: "rate limited",
        }.get(status) or ("server error" if status >= 500 else "request failed")

    # --- one model call -----------------------------------------------------------------------

    async def complete(
        self, request: ModelRequest, *, on_text: TextCallback | None = None, on_retry: RetryCallback | None = None
    ) -> ModelResponse:
        """Sample the model once, retrying per the options (see the module docstring).

        Raises:
            ModelError: a non-retryable failure, or the last retryable one after `max_attempts`.
        """
        model = request.model or self.model
        body = self.build_body(request, model)
        if request.tools and self._tools_unstreamed:
            body = self.with_stream(body, False)
        notify = on_retry or self._on_retry
        logger.debug("%s: POST %s model=%s messages=%d", self.name, self._shown_url, model, len(request.messages))
        attempt, fell_back = 1, False
        while True:
            seen = Seen()
            try:
                answer = await self._attempt(body, model, on_text, seen)
                if fell_back and request.tools:
                    self._remember_unstreamed_tools()
                return self._masked(self.to_response(answer, model, request))
            except AttemptFailed as failure:
                if self._falls_back(seen, body, failure):
                    body, fell_back = self.with_stream(body, False), True
                    await self._fall_back(attempt, failure, notify)
                elif not failure.retryable or attempt >= self.retry_options.max_attempts:
                    raise self._final_error(failure, attempt) from failure.__cause__
                else:
                    await self._before_retry(attempt, failure, seen, notify)
            attempt += 1

    def _falls_back(self, seen: Seen, body: dict[str, Any], failure: AttemptFailed) -> bool:
        return (
            self.unstreamed_fallback
            and seen.streaming
            and not seen.output
            and bool(body.get("stream"))
            and not failure.timed_out
        )

    async def _attempt(self, body: dict[str, Any], model: str, on_text: TextCallback | None, seen: Seen) -> A:
        stream = bool(body.get("stream"))
        try:
            async with self._client.stream(
                "POST", self._url, json=body, headers=self._headers(stream), timeout=self._timeout
            ) as response:
                await self._check_status(response, model)
                if stream and not _is_json(response):
                    seen.streaming = True
                    try:
                        return await self._read_stream(response, on_text, seen)
                    except (AttemptFailed, httpx.HTTPError):
                        await _drop_connection(response)
                        raise
                answer = self._parse_whole_body(await response.aread())
        except httpx.HTTPError as exc:
            raise self._transport_failure(exc) from exc
        text = answer.full_text()
        if on_text is not None and text:  # a whole answer arrives as one delta
            await on_text(self._redact(text))
        return answer

    async def _read_stream(self, response: httpx.Response, on_text: TextCallback | None, seen: Seen) -> A:
        decoder = self.decoder()
        mask = StreamMask(self._key)
        try:
            async with aclosing(iter_sse_data(response.aiter_lines())) as events:
                async for data in events:
                    if decoder.done:  # drain the rest so the connection can be reused
                        continue
                    text = mask.feed(decoder.feed(data))
                    seen.output = seen.output or decoder.has_output()
                    if text and on_text is not None:
                        seen.text = True
                        await on_text(text)
        except httpx.HTTPError:
            if not decoder.done:
                raise
        if not decoder.done:
            raise self.failed(f"stream from {self._shown_url} ended before {self.stream_end} (truncated)", True)
        rest = mask.flush()
        if rest and on_text is not None:
            await on_text(rest)
        return decoder.answer()

    stream_end: str = "its last event"
    """How the API ends a stream, for the message of one that ended early."""

    def _parse_whole_body(self, body: bytes) -> A:
        try:
            data = obj(loads_bounded(body))
        except ValueError:
            text = error_text(body, self.redact_fragments)
            raise self.failed(f"response from {self._shown_url} is not JSON: {text}", True) from None
        return self.parse_whole(data, body)

    def parse_event(self, data: str) -> dict[str, Any]:
        """One event's JSON object, for decoders.

        Raises:
            AttemptFailed: it is not JSON (a malformed stream, retried).
        """
        try:
            return obj(loads_bounded(data))
        except ValueError:
            from agent_server.llm._openai_wire import CHUNK_TEXT_MAX, cut_middle

            quoted = cut_middle(self.redact_fragments(data), CHUNK_TEXT_MAX)
            raise self.failed(f"malformed stream chunk from {self._shown_url}: {quoted!r}", True) from None

    def server_error(self, body: bytes, *, in_stream: bool) -> AttemptFailed:
        """An error object the server sent with HTTP 200 (in the stream, or as the whole body)."""
        text = error_text(body, self.redact_fragments)
        where = "in stream " if in_stream else ""
        return self.failed(f"server error {where}from {self._shown_url}: {text}", not is_validation_error(text))

    async def _check_status(self, response: httpx.Response, model: str) -> None:
        status = response.status_code
        if status < 300:
            return
        await response.aread()
        text = error_text(response.content, self.redact_fragments)
        retryable = status in RETRYABLE_STATUS or (status >= 500 and not is_validation_error(text))
        should_retry = response.headers.get("x-should-retry")
        if should_retry in ("true", "false"):
            retryable = should_retry == "true"
        problem = self.problem(status)
        if status == 404:
            problem += f" (model {model!r})"
        elif status >= 500 and not retryable:
            problem += ", the request was judged invalid, not retried"
        message = f"{problem} (HTTP {status} from {self._shown_url}): {text}"
        retry_after = retry_after_s(response.headers) if retryable else None
        raise self.failed(message, retryable, status=status, retry_after=retry_after)

    def _transport_failure(self, exc: httpx.HTTPError) -> AttemptFailed:
        detail = str(exc) or type(exc).__name__
        url = self._shown_url
        if isinstance(exc, httpx.ConnectTimeout):
            return self.failed(f"connecting to {url} timed out after {self.retry_options.connect_timeout_s} s", True)
        if isinstance(exc, httpx.ReadTimeout):
            return self._read_timeout()
        if isinstance(exc, httpx.ConnectError):
            return self.failed(f"cannot connect to {url}: {detail}", True)
        if isinstance(exc, httpx.TimeoutException | httpx.NetworkError | httpx.RemoteProtocolError):
            return self.failed(f"connection to {url} failed ({type(exc).__name__}): {detail}", True)
        return self.failed(f"request to {url} failed ({type(exc).__name__}): {detail}", False)

    def _read_timeout(self) -> AttemptFailed:
        message = f"read timeout: no data from {self._shown_url} for {self.retry_options.read_timeout_s} s"
        if not self._retry_read_timeout:
            message += (
                "; not retried: a local server is likely still busy with this request and would queue a retry "
                f"behind it (raise {self.settings_key}.read_timeout_s for a slow model, or set "
                f"{self.settings_key}.retry_read_timeout: true)"
            )
        failure = self.failed(message, self._retry_read_timeout)
        failure.timed_out = True
        return failure

    def failed(
        self, message: str, retryable: bool, *, status: int | None = None, retry_after: float | None = None
    ) -> AttemptFailed:
        return AttemptFailed(self._redact(message), retryable=retryable, status=status, retry_after=retry_after)

    def _final_error(self, failure: AttemptFailed, attempt: int) -> ModelError:
        message = failure.message
        if failure.retryable:
            message += f" (gave up after {attempt} attempt{'s' if attempt != 1 else ''})"
        return ModelError(message, retryable=failure.retryable, status=failure.status)

    def _remember_unstreamed_tools(self) -> None:
        if not self._tools_unstreamed:
            self._tools_unstreamed = True
            logger.info(
                "%s: %s answered without streaming: requests with tools are no longer streamed",
                self.name,
                self._shown_url,
            )

    async def _fall_back(self, attempt: int, failure: AttemptFailed, notify: RetryCallback | None) -> None:
        reason = (
            f"{failure.message}; the stream broke before any output, retrying once without streaming "
            f"(set {self.settings_key}.stream = false for a server that cannot stream, e.g. tool calls on "
            "llama-cpp-python)"
        )
        logger.warning("%s: attempt %d: %s", self.name, attempt, reason)
        if notify is not None:
            await notify(attempt, reason)

    async def _before_retry(
        self, attempt: int, failure: AttemptFailed, seen: Seen, notify: RetryCallback | None
    ) -> None:
        options = self.retry_options
        if failure.retry_after is not None:
            delay = min(failure.retry_after, options.retry_after_max_s)
        else:
            delay = random.uniform(0, min(options.backoff_max_s, options.backoff_base_s * 2 ** (attempt - 1)))
        reason = f"{failure.message}; retrying in {delay:.2f} s (attempt {attempt + 1} of {options.max_attempts})"
        if seen.text:
            reason += "; the text it streamed is discarded"
        logger.warning("%s: attempt %d failed: %s", self.name, attempt, reason)
        if notify is not None:
            await notify(attempt, reason)
        await anyio.sleep(delay)

    def _headers(self, stream: bool) -> dict[str, str]:
        headers = {"Accept": "text/event-stream" if stream else "application/json", **self.extra_headers()}
        if self._key is not None:
            headers.update(self.auth_headers(self._key.reveal()))
        return headers

    def _masked(self, response: ModelResponse) -> ModelResponse:
        """The key masked in everything the response carries on (text, reasoning, native content)."""
        key = self._key
        if key is None:
            return response
        update: dict[str, Any] = {"text": key.mask(response.text)}
        if response.reasoning:
            update["reasoning"] = key.mask(response.reasoning)
        if response.native is not None:
            # A masked thinking block no longer matches its signature: the API then refuses it, which is
            # better than storing a key the model happened to write.
            masked = json.loads(key.mask(json.dumps(response.native.content)))
            update["native"] = NativeContent(api=response.native.api, content=masked)
        return response.model_copy(update=update)

    def _redact(self, text: str) -> str:
        return self._key.mask(text) if self._key is not None else text

    def redact_fragments(self, text: str) -> str:
        """For a server's error text: a piece of the key at its edges is masked too (a key split across
        stream chunks, or a body that ends inside one)."""
        return self._key.mask_fragments(text) if self._key is not None else text


async def _drop_connection(response: httpx.Response) -> None:
    """Close a broken stream's connection. When its body ended cleanly (only the last event missing) the pool
    would keep it for the next request, though a server whose stream broke may be done with it: the next
    request would then fail on it. A closed socket is dropped by the pool instead of reused."""
    close = getattr(response.extensions.get("network_stream"), "aclose", None)
    if close is not None:
        await close()


def _is_json(response: httpx.Response) -> bool:
    """A server that ignored `stream: true` and answered with one JSON object."""
    return response.headers.get("content-type", "").startswith("application/json")


def endpoint(base_url: str, path: str, *, example: str) -> httpx.URL:
    """`{base_url}{path}` (a trailing slash and any query kept in place).

    Raises:
        ConfigError: not an http(s) URL with a host.
    """
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL as exc:
        raise ConfigError(f"invalid base URL: {exc}") from None
    if url.scheme not in {"http", "https"} or not url.host:
        raise ConfigError(f"the base URL must be an http:// or https:// URL with a host, such as {example}")
    return url.copy_with(path=url.path.rstrip("/") + path)
