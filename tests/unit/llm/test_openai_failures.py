"""OpenAIChatLLM failures against a real HTTP server: retries, errors, timeouts, cancellation, secrets."""

from __future__ import annotations

import logging
import socket
import time
import traceback
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest

from agent_server.errors import ModelError
from agent_server.llm._endpoint import is_local_host
from agent_server.llm.base import ModelRequest
from agent_server.llm.openai import OpenAIChatLLM
from agent_server.settings import OpenAIOptions
from agent_server.types import Message
from tests.fakes.openai_server import FakeOpenAIServer, Reply, chunk, completion, text_stream

pytestmark = pytest.mark.anyio

KEY = "sk-proj-SECRETSECRET-0123456789abcdef"
REQUEST = ModelRequest(messages=[Message(role="user", content="Hi")])
FAST = {"backoff_base_s": 0.0, "backoff_max_s": 0.0}


def error_body(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


@asynccontextmanager
async def provider(base_url: str, **options: Any) -> AsyncIterator[tuple[OpenAIChatLLM, list[tuple[int, str]]]]:
    """The provider with tiny backoff by default, and the `on_retry` calls it made."""
    retries: list[tuple[int, str]] = []

    async def on_retry(attempt: int, reason: str) -> None:
        retries.append((attempt, reason))

    llm = OpenAIChatLLM(
        OpenAIOptions(base_url=base_url, **{**FAST, **options}), api_key=KEY, model="gpt-test", on_retry=on_retry
    )
    try:
        yield llm, retries
    finally:
        await llm.aclose()


async def test_429_with_retry_after_zero_is_retried_at_once_instead_of_backing_off() -> None:
    async with (
        FakeOpenAIServer() as server,
        provider(server.base_url, backoff_base_s=60, backoff_max_s=60) as (llm, retries),
    ):
        server.add(Reply(status=429, headers={"retry-after": "0"}, json=error_body("Rate limit reached")))
        server.add(Reply(sse=text_stream("ok")))
        with anyio.fail_after(5):
            response = await llm.complete(REQUEST)

    assert response.text == "ok"
    assert len(server.requests) == 2
    [(attempt, reason)] = retries
    assert attempt == 1
    assert "rate limited (HTTP 429" in reason and "Rate limit reached" in reason


async def test_a_long_retry_after_is_capped() -> None:
    async with FakeOpenAIServer() as server, provider(server.base_url, retry_after_max_s=0.01) as (llm, _):
        server.add(Reply(status=503, headers={"retry-after": "3600"}, json=error_body("overloaded")))
        server.add(Reply(sse=text_stream("ok")))
        with anyio.fail_after(5):
            assert (await llm.complete(REQUEST)).text == "ok"


async def test_500_on_every_attempt_gives_an_error_with_status_server_text_and_attempts() -> None:
    async with FakeOpenAIServer() as server, provider(server.base_url, max_attempts=3) as (llm, retries):
        server.add(*[Reply(status=500, json=error_body("The server had an error")) for _ in range(3)])
        with anyio.fail_after(5), pytest.raises(ModelError) as caught:
            await llm.complete(REQUEST)

    error = caught.value
    assert len(server.requests) == 3
    assert [attempt for attempt, _ in retries] == [1, 2]
    assert error.status == 500 and error.retryable
    assert "server error (HTTP 500 from http://127.0.0.1:" in error.message
    assert "The server had an error" in error.message
    assert "after 3 attempts" in error.message


@pytest.mark.parametrize(
    ("status", "problem"),
    [
        (401, "authentication failed: check OPENAI_API_KEY"),
        (403, "authentication failed: check OPENAI_API_KEY"),
        (404, "unknown model or endpoint (model 'gpt-test')"),
        (400, "request rejected"),
        (422, "request rejected"),
    ],
)
async def test_client_errors_are_not_retried_and_name_the_problem(status: int, problem: str) -> None:
    async with FakeOpenAIServer() as server, provider(server.base_url) as (llm, retries):
        server.add(Reply(status=status, json=error_body(f"server says {status}")), Reply(sse=text_stream("no")))
        with anyio.fail_after(5), pytest.raises(ModelError) as caught:
            await llm.complete(REQUEST)

    assert len(server.requests) == 1 and retries == []
    assert caught.value.status == status and not caught.value.retryable
    assert caught.value.message.startswith(problem)
    assert f"HTTP {status}" in caught.value.message
    assert caught.value.message.endswith(f": server says {status}")


async def test_an_error_body_that_is_not_json_is_quoted_truncated() -> None:
    async with FakeOpenAIServer() as server, provider(server.base_url) as (llm, _):
        server.add(Reply(status=400, body=b"<html>" + b"x" * 2000 + b"</html>", headers={"content-type": "text/html"}))
        with anyio.fail_after(5), pytest.raises(ModelError) as caught:
            await llm.complete(REQUEST)

    assert "request rejected (HTTP 400" in caught.value.message
    assert ": <html>xxx" in caught.value.message
    assert caught.value.message.endswith("xxx</html>")  # the middle is cut, the end kept
    assert len(caught.value.message) < 1400


@pytest.mark.parametrize("stream", [True, False])
async def test_a_read_timeout_is_retried_then_fails_when_retry_read_timeout_is_on(stream: bool) -> None:
    options = {"read_timeout_s": 0.1, "max_attempts": 2, "stream": stream, "retry_read_timeout": True}
    async with FakeOpenAIServer() as server, provider(server.base_url, **options) as (llm, retries):
        server.add(Reply(stall=True), Reply(stall=True))
        with anyio.fail_after(5), pytest.raises(ModelError) as caught:
            await llm.complete(REQUEST)
        with anyio.fail_after(5):
            await server.wait_for_disconnects(2)  # the client hung up on both stalled requests

    assert len(server.requests) == 2 and len(retries) == 1
    assert caught.value.retryable and caught.value.status is None
    assert "read timeout: no data from http://127.0.0.1:" in caught.value.message
    assert "for 0.1 s (gave up after 2 attempts)" in caught.value.message


@pytest.mark.parametrize(
    ("reply", "stream"),
    [
        (Reply(stall=True), False),
        (Reply(stall=True), True),
        (Reply(sse=text_stream("Half ", "done"), stall_after=2), True),
    ],
    ids=["whole", "streamed-before-output", "streamed-after-text"],
)
async def test_a_read_timeout_on_a_local_server_is_not_retried_into_its_queue(reply: Reply, stream: bool) -> None:
    options: dict[str, Any] = {"read_timeout_s": 0.2, "max_attempts": 4, "stream": stream}
    async with FakeOpenAIServer() as server, provider(server.base_url, **options) as (llm, retries):
        server.add(reply, Reply(sse=text_stream("a retry")), Reply(json=completion("a fallback")))
        with anyio.fail_after(5), pytest.raises(ModelError) as caught:
            await llm.complete(REQUEST)
        with anyio.fail_after(5):
            await server.wait_for_disconnects(1)

    assert len(server.requests) == 1 and retries == []  # 127.0.0.1 is still busy: nothing was sent behind it
    assert not caught.value.retryable
    assert "read timeout: no data from http://127.0.0.1:" in caught.value.message
    assert "not retried" in caught.value.message and "openai.read_timeout_s" in caught.value.message
    assert "openai.retry_read_timeout" in caught.value.message and "gave up after" not in caught.value.message


async def test_a_read_timeout_on_a_remote_endpoint_is_retried_by_default() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        raise httpx.ReadTimeout("timed out", request=request)

    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    options = OpenAIOptions(base_url="https://models.example.com/v1", max_attempts=3, **FAST)
    llm = OpenAIChatLLM(options, api_key=KEY, model="gpt-test", http_client=http)
    try:
        with anyio.fail_after(5), pytest.raises(ModelError) as caught:
            await llm.complete(REQUEST)
    finally:
        await http.aclose()
    assert len(sent) == 3 and caught.value.retryable
    assert "gave up after 3 attempts" in caught.value.message


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("127.0.0.1", True),
        ("127.8.9.1", True),
        ("[::1]", True),
        ("localhost", True),
        ("gpu.localhost", True),
        ("192.168.1.20", True),
        ("10.0.0.5", True),
        ("host.docker.internal", True),
        ("api.openai.com", False),
        ("8.8.8.8", False),
        ("models.example.com", False),
    ],
)
def test_local_hosts_are_told_apart_from_remote_ones(host: str, local: bool) -> None:
    assert is_local_host(host) is local


async def test_a_stream_that_stalls_after_text_is_retried_and_only_the_retry_text_is_kept() -> None:
    tokens: list[str] = []

    async def on_text(text: str) -> None:
        tokens.append(text)

    options: dict[str, Any] = {"read_timeout_s": 0.2, "retry_read_timeout": True}
    async with FakeOpenAIServer() as server, provider(server.base_url, **options) as (llm, retries):
        server.add(Reply(sse=text_stream("Discarded ", "answer"), stall_after=2), Reply(sse=text_stream("Kept.")))
        with anyio.fail_after(5):
            response = await llm.complete(REQUEST, on_text=on_text)

    assert response.text == "Kept."
    assert tokens == ["Discarded ", "Kept."]
    assert [attempt for attempt, _ in retries] == [1]


async def test_a_stream_cut_mid_way_is_retried() -> None:
    async with FakeOpenAIServer() as server, provider(server.base_url) as (llm, retries):
        server.add(Reply(sse=text_stream("Hel", "lo"), cut_after=2), Reply(sse=text_stream("Hello")))
        with anyio.fail_after(5):
            response = await llm.complete(REQUEST)

    assert response.text == "Hello"
    assert len(server.requests) == 2
    [(_, reason)] = retries
    assert "connection to http://127.0.0.1:" in reason and "RemoteProtocolError" in reason


async def test_a_stream_without_done_is_truncated_even_after_a_finish_reason() -> None:
    events = [chunk(content="All of it."), chunk(finish_reason="stop")]
    async with FakeOpenAIServer() as server, provider(server.base_url, max_attempts=2) as (llm, retries):
        server.add(Reply(sse=events, done=False), Reply(sse=events, done=False))
        with anyio.fail_after(5), pytest.raises(ModelError) as caught:
            await llm.complete(REQUEST)

    assert len(server.requests) == 2 and len(retries) == 1
    assert caught.value.retryable
    assert "ended before data: [DONE] (truncated) (gave up after 2 attempts)" in caught.value.message


async def test_an_error_event_in_the_stream_is_a_retryable_failure() -> None:
    async with FakeOpenAIServer() as server, provider(server.base_url) as (llm, retries):
        server.add(Reply(sse=[chunk(content="Hal"), {"error": {"message": "backend crashed"}}], done=False))
        server.add(Reply(sse=text_stream("Whole.")))
        with anyio.fail_after(5):
            assert (await llm.complete(REQUEST)).text == "Whole."

    assert "server error in stream" in retries[0][1] and "backend crashed" in retries[0][1]


async def test_connection_refused_is_retried_then_fails() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with provider(f"http://127.0.0.1:{port}/v1", max_attempts=2) as (llm, retries):
        with anyio.fail_after(5), pytest.raises(ModelError) as caught:
            await llm.complete(REQUEST)

    assert len(retries) == 1
    assert caught.value.message.startswith(f"cannot connect to http://127.0.0.1:{port}/v1/chat/completions")


async def test_cancellation_mid_stream_returns_at_once_and_closes_the_connection() -> None:
    first_text = anyio.Event()

    async def on_text(text: str) -> None:
        first_text.set()

    async with FakeOpenAIServer() as server, provider(server.base_url) as (llm, _):
        server.add(Reply(sse=text_stream("First ", "never sent"), stall_after=2))
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                scope = anyio.CancelScope()

                async def call() -> None:
                    with scope:
                        await llm.complete(REQUEST, on_text=on_text)
                        pytest.fail("complete() returned although the server stalled")

                tg.start_soon(call)
                await first_text.wait()
                cancelled_at = time.monotonic()
                scope.cancel()
            returned_after = time.monotonic() - cancelled_at
            await server.wait_for_disconnects(1)

    assert scope.cancelled_caught
    assert returned_after < 0.5
    assert server.disconnects == 1


async def test_the_api_key_is_sent_but_never_appears_in_errors_logs_or_repr(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    echo = f"Incorrect API key provided: {KEY}. You can find your API key at https://example.invalid."
    async with FakeOpenAIServer() as server, provider(server.base_url, max_attempts=2) as (llm, retries):
        server.add(Reply(status=500, json=error_body(f"upstream rejected {KEY}")), Reply(sse=text_stream("ok")))
        server.add(Reply(status=401, json=error_body(echo)))
        with anyio.fail_after(5):
            await llm.complete(REQUEST)
            with pytest.raises(ModelError) as caught:
                await llm.complete(REQUEST)

    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    error = caught.value
    assert "Incorrect API key provided: ***." in error.message
    rendered = [
        str(error),
        repr(error),
        "".join(traceback.format_exception(error)),
        repr(llm),
        str(vars(llm)),
        caplog.text,
        *(reason for _, reason in retries),
    ]
    assert "upstream rejected ***" in caplog.text
    for text in rendered:
        assert KEY not in text
