"""The provider contract: every model API (Chat Completions, Anthropic Messages, OpenAI Responses) passes the same
cases, written once and encoded per API by `tests/fakes/dialects.py`, against a real HTTP server on 127.0.0.1.

Tool rounds (one call, parallel calls), streamed and whole text, errors (not retried, with the server's own
message), retries (429 honouring retry-after, 5xx, a broken stream, an error event mid-stream), usage with cache
and reasoning counts, stop reasons, cancellation mid-stream, and the key never in a message.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from agent_server.errors import ModelError
from agent_server.llm.base import ModelRequest
from agent_server.types import Message, ToolSpec
from tests.fakes.dialects import DIALECTS, Answer, Call, Dialect, Provider
from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)]

KEY = "sk-contract-SECRET-0123456789abcdef"
TOOLS = [ToolSpec(name="read_file", description="Read a file"), ToolSpec(name="list_dir")]
SYSTEM = Message(role="system", content="You are terse.")
USER = Message(role="user", content="Read a.txt and b.txt")


@asynccontextmanager
async def serving(dialect: Dialect, **options: Any) -> AsyncIterator[tuple[FakeOpenAIServer, Provider, list[str]]]:
    retries: list[str] = []

    async def on_retry(attempt: int, reason: str) -> None:
        retries.append(reason)

    async with FakeOpenAIServer() as server:
        llm = dialect.provider(server, key=KEY, **options)
        llm._on_retry = on_retry  # pyright: ignore[reportPrivateUsage]
        try:
            with anyio.fail_after(10):
                yield server, llm, retries
        finally:
            await llm.aclose()


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_a_tool_round_with_parallel_calls(dialect: Dialect, stream: bool) -> None:
    calls = [Call("call_a", "read_file", '{"path": "a.txt"}'), Call("call_b", "read_file", '{"path": "b.txt"}')]
    async with serving(dialect, stream=stream) as (server, llm, _):
        server.add(dialect.answer(Answer(text=["Reading ", "both."], calls=calls, stop="tools"), stream=stream))
        server.add(dialect.answer(Answer(text=["A says 1, ", "B says 2."]), stream=stream))
        first = await llm.complete(ModelRequest(messages=[SYSTEM, USER], tools=TOOLS))
        assert [(c.id, c.name, c.arguments) for c in first.tool_calls] == [
            ("call_a", "read_file", {"path": "a.txt"}),
            ("call_b", "read_file", {"path": "b.txt"}),
        ]
        assert first.text == "Reading both." and first.stop_reason == "tool_use"
        history = [
            SYSTEM,
            USER,
            Message(role="assistant", content=first.text, tool_calls=first.tool_calls, native=first.native),
            Message(role="tool", tool_call_id="call_a", name="read_file", content="1"),
            Message(role="tool", tool_call_id="call_b", name="read_file", content="2", is_error=True),
        ]
        second = await llm.complete(ModelRequest(messages=history, tools=TOOLS))
    assert second.text == "A says 1, B says 2." and second.stop_reason == "end_turn" and not second.tool_calls
    assert dialect.sent_tool_results(server.requests[1].json) == [("call_a", "1"), ("call_b", "2")]
    assert dialect.sent_key(server.requests[0].headers) == KEY


@pytest.mark.parametrize(("stream", "depth"), [(True, 100), (True, 100_000), (False, 100)])
async def test_arguments_nested_too_deep_are_an_error_for_the_model(dialect: Dialect, stream: bool, depth: int) -> None:
    # Deeper than one call's arguments may nest (64), and at 100 shallower than a whole body may (256): a body
    # parsed whole (Anthropic's `input` is an object there) must be measured too, not only argument text.
    deep = '{"a": ' * depth + "1" + "}" * depth
    calls = [Call("call_deep", "read_file", deep), Call("call_ok", "read_file", '{"path": "a.txt"}')]
    async with serving(dialect, stream=stream) as (server, llm, _):
        server.add(dialect.answer(Answer(text=["x"], calls=calls, stop="tools"), stream=stream))
        answer = await llm.complete(ModelRequest(messages=[SYSTEM, USER], tools=TOOLS))
    by_id = {c.id: c for c in answer.tool_calls}
    assert by_id["call_ok"].arguments == {"path": "a.txt"} and by_id["call_ok"].arguments_error is None
    error = by_id["call_deep"].arguments_error
    assert by_id["call_deep"].arguments == {} and error is not None and "nested deeper than 64" in error


async def test_streamed_text_reaches_on_text_as_it_arrives_and_whole(dialect: Dialect) -> None:
    deltas: list[str] = []

    async def on_text(text: str) -> None:
        deltas.append(text)

    async with serving(dialect) as (server, llm, _):
        server.add(dialect.answer(Answer(text=["Hel", "lo ", "there."]), stream=True))
        response = await llm.complete(ModelRequest(messages=[USER]), on_text=on_text)
    assert deltas == ["Hel", "lo ", "there."] and response.text == "Hello there."
    assert server.requests[0].json["stream"] is True


async def test_usage_with_cache_and_reasoning_counts_is_recorded_and_priced(dialect: Dialect) -> None:
    answer = Answer(text=["ok"], input_tokens=1000, output_tokens=100, cache_read=800, reasoning_tokens=40)
    async with serving(dialect) as (server, llm, _):
        server.add(dialect.answer(answer, stream=True))
        usage = (await llm.complete(ModelRequest(messages=[USER]))).usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (1000, 100, 1100)
    assert usage.cache_read_tokens == 800
    if dialect.name != "anthropic":  # Anthropic does not count thinking tokens apart
        assert usage.reasoning_tokens == 40
    assert usage.cost_usd is not None and usage.cost_usd > 0  # every dialect's model is in the built-in table


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_an_answer_cut_at_the_token_limit_says_max_tokens(dialect: Dialect, stream: bool) -> None:
    cut = Answer(calls=[Call("call_c", "read_file", '{"path": "a.t')], stop="length")
    async with serving(dialect, stream=stream) as (server, llm, _):
        server.add(dialect.answer(cut, stream=stream))
        response = await llm.complete(ModelRequest(messages=[USER], tools=TOOLS))
    assert response.stop_reason == "max_tokens"
    assert [c.arguments_error is not None for c in response.tool_calls] == [True]


@pytest.mark.parametrize(
    ("status", "kind"), [(400, "invalid_request_error"), (401, "authentication_error"), (404, "not_found_error")]
)
async def test_client_errors_fail_at_once_with_the_servers_message(dialect: Dialect, status: int, kind: str) -> None:
    async with serving(dialect) as (server, llm, retries):
        server.add(dialect.error(status, f"the server says no {KEY}", kind=kind))
        with pytest.raises(ModelError) as caught:
            await llm.complete(ModelRequest(messages=[USER]))
    assert len(server.requests) == 1 and retries == []
    error = caught.value
    assert error.status == status and not error.retryable
    assert f"HTTP {status}" in error.message and "the server says no" in error.message
    assert KEY not in error.message
    if status == 401:
        assert "API_KEY" in error.message


@pytest.mark.parametrize("status", [429, 500, 529])
async def test_rate_limits_and_server_errors_are_retried_honouring_retry_after(dialect: Dialect, status: int) -> None:
    async with serving(dialect, backoff_base_s=30, backoff_max_s=30) as (server, llm, retries):
        server.add(dialect.error(status, "busy", kind="overloaded_error", headers={"retry-after": "0"}))
        server.add(dialect.answer(Answer(text=["fine"]), stream=True))
        response = await llm.complete(ModelRequest(messages=[USER]))
    assert response.text == "fine" and len(server.requests) == 2
    assert len(retries) == 1 and f"HTTP {status}" in retries[0] and "retrying in 0.00 s" in retries[0]


async def test_a_broken_stream_is_retried_and_only_the_retrys_text_is_kept(dialect: Dialect) -> None:
    deltas: list[str] = []

    async def on_text(text: str) -> None:
        deltas.append(text)

    async with serving(dialect) as (server, llm, retries):
        broken = dialect.answer(Answer(text=["Lost ", "words ", "here"]), stream=True)
        assert broken.sse is not None
        broken.cut_after = len(broken.sse) - 2  # after the text, before the end
        server.add(broken, dialect.answer(Answer(text=["Kept."]), stream=True))
        response = await llm.complete(ModelRequest(messages=[USER]), on_text=on_text)
    assert response.text == "Kept." and deltas[-1] == "Kept."
    assert len(retries) == 1 and "discarded" in retries[0]


async def test_an_error_event_mid_stream_is_retried(dialect: Dialect) -> None:
    async with serving(dialect) as (server, llm, retries):
        reply = dialect.answer(Answer(text=["Half"]), stream=True)
        assert reply.sse is not None
        reply.sse = [*reply.sse[:2], dialect.error_event(f"overloaded {KEY}")]
        reply.done = False
        server.add(reply, dialect.answer(Answer(text=["Whole."]), stream=True))
        response = await llm.complete(ModelRequest(messages=[USER]))
    assert response.text == "Whole."
    assert len(retries) == 1 and "overloaded" in retries[0] and KEY not in retries[0]


async def test_a_stream_that_ends_before_its_last_event_is_truncated_and_retried(dialect: Dialect) -> None:
    async with serving(dialect, max_attempts=2) as (server, llm, retries):
        for _ in range(2):
            reply = dialect.answer(Answer(text=["All ", "of it."]), stream=True)
            assert reply.sse is not None
            reply.sse, reply.done = reply.sse[:-1], False
            server.add(reply)
        with pytest.raises(ModelError) as caught:
            await llm.complete(ModelRequest(messages=[USER]))
    assert "(truncated)" in caught.value.message and "gave up after 2 attempts" in caught.value.message


async def test_cancellation_mid_stream_returns_at_once_and_hangs_up(dialect: Dialect) -> None:
    started = anyio.Event()

    async def on_text(text: str) -> None:
        started.set()

    async with serving(dialect) as (server, llm, _):
        reply = dialect.answer(Answer(text=["First ", "never"]), stream=True)
        assert reply.sse is not None
        reply.stall_after = len(reply.sse) - 2  # after the text, before the end
        server.add(reply)
        async with anyio.create_task_group() as tg:
            scope = anyio.CancelScope()

            async def call() -> None:
                with scope:
                    await llm.complete(ModelRequest(messages=[USER]), on_text=on_text)
                    pytest.fail("complete() returned although the server stalled")

            tg.start_soon(call)
            await started.wait()
            cancelled_at = time.monotonic()
            scope.cancel()
        assert time.monotonic() - cancelled_at < 0.5
        await server.wait_for_disconnects(1)
    assert scope.cancelled_caught
