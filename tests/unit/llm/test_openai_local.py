"""OpenAIChatLLM against the quirks of local OpenAI-compatible servers (llama.cpp, llama-cpp-python)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from agent_server.errors import ModelError
from agent_server.llm.base import ModelRequest
from agent_server.llm.openai import OpenAIChatLLM
from agent_server.settings import OpenAIOptions
from agent_server.types import Message, ToolCall, ToolSpec
from tests.fakes.openai_server import FakeOpenAIServer, Quirks, Reply, chunk, completion, text_stream

pytestmark = pytest.mark.anyio

KEY = "sk-proj-SECRETSECRET-0123456789abcdefghijklmnopqrstuv"
FAST = {"backoff_base_s": 0.0, "backoff_max_s": 0.0}
TOOLS = [ToolSpec(name="list_dir"), ToolSpec(name="read_file")]
CALLED = Message(role="assistant", content="", tool_calls=[ToolCall(id="c1", name="list_dir", arguments={})])
ROUND_2 = ModelRequest(
    messages=[Message(role="user", content="Hi"), CALLED, Message(role="tool", tool_call_id="c1", content="a.txt")],
    tools=TOOLS,
)


@asynccontextmanager
async def provider(
    quirks: Quirks | None = None, **options: Any
) -> AsyncIterator[tuple[FakeOpenAIServer, OpenAIChatLLM, list[str]]]:
    retries: list[str] = []

    async def on_retry(attempt: int, reason: str) -> None:
        retries.append(reason)

    async with FakeOpenAIServer(quirks) as server:
        opts = OpenAIOptions(base_url=server.base_url, **{**FAST, **options})
        llm = OpenAIChatLLM(opts, api_key=KEY, model="m", on_retry=on_retry)
        try:
            with anyio.fail_after(10):
                yield server, llm, retries
        finally:
            await llm.aclose()


async def test_an_assistant_tool_call_message_without_text_is_accepted_by_a_server_that_rejects_null() -> None:
    async with provider(Quirks(reject_null_content=True)) as (server, llm, _):
        server.add(Reply(sse=text_stream("done")))
        response = await llm.complete(ROUND_2)
    assert response.text == "done"
    assert server.requests[0].json["messages"][1]["content"] == ""


async def test_a_validation_shaped_500_is_not_retried_and_keeps_its_decisive_last_line() -> None:
    async with provider() as (server, llm, retries):
        server.add(Reply(status=500, json={"error": {"message": _long_validation_error()}}))
        with pytest.raises(ModelError) as caught:
            await llm.complete(ROUND_2)
    assert len(server.requests) == 1 and retries == []
    message = caught.value.message
    assert "HTTP 500" in message and "not retried" in message
    assert message.endswith("Input should be a valid string [type=string_type, input_value=None]")
    assert "characters cut" in message


async def _ignore(_text: str) -> None:
    pass


def _long_validation_error() -> str:
    lines = ["26 validation errors for CreateChatCompletionRequest"]
    lines += [
        f"body.messages.1.typed-dict.user.role\n  Input should be 'user' [type=literal_error] {i}" for i in range(25)
    ]
    lines.append(
        "body.messages.1.typed-dict.assistant.content.str\n"
        "  Input should be a valid string [type=string_type, input_value=None]"
    )
    return "\n".join(lines)


async def test_a_plain_500_is_still_retried_and_the_message_says_no_text_was_discarded_when_none_was() -> None:
    async with provider(max_attempts=2, stream=False) as (server, llm, retries):
        server.add(Reply(status=500, json={"error": {"message": "CUDA error: out of memory"}}))
        server.add(Reply(json=completion("ok")))
        response = await llm.complete(ROUND_2)
    assert response.text == "ok"
    assert len(retries) == 1
    assert "out of memory" in retries[0] and "retrying in" in retries[0]
    assert "discarded" not in retries[0]


async def test_text_streamed_by_a_failed_attempt_is_said_to_be_discarded() -> None:
    async with provider(max_attempts=2) as (server, llm, retries):
        server.add(Reply(sse=[chunk(content="partial")], cut_after=1))
        server.add(Reply(sse=text_stream("whole")))
        response = await llm.complete(ROUND_2, on_text=_ignore)
    assert response.text == "whole"
    assert "the text it streamed is discarded" in retries[0]


async def test_a_server_that_cannot_stream_tool_calls_is_asked_again_without_streaming_on_a_fresh_connection() -> None:
    async with provider(Quirks(no_streamed_tools=True), max_attempts=1) as (server, llm, retries):
        server.add(Reply(json=completion(None, tool_calls=[("c2", "read_file", '{"path": "a.txt"}')])))
        response = await llm.complete(ROUND_2)
    assert [c.name for c in response.tool_calls] == ["read_file"]
    assert [r.json["stream"] for r in server.requests] == [True, False]
    assert "stream_options" not in server.requests[1].json
    assert server.connections == 2  # not sent on the connection the broken stream left behind
    assert "ReadError" not in str(retries) and "disconnected" not in str(retries)
    assert len(retries) == 1 and "retrying once without streaming" in retries[0]
    assert "openai.stream = false" in retries[0]


async def test_after_the_fallback_the_next_request_on_the_pool_still_works() -> None:
    async with provider(Quirks(no_streamed_tools=True), max_attempts=1) as (server, llm, _):
        server.add(Reply(json=completion("first")), Reply(sse=text_stream("second")))
        assert (await llm.complete(ROUND_2)).text == "first"
        plain = ModelRequest(messages=[Message(role="user", content="Hi")])
        assert (await llm.complete(plain)).text == "second"


async def test_unreported_usage_is_unknown_not_zero() -> None:
    async with provider(stream=False) as (server, llm, _):
        server.add(Reply(json=completion("ok", usage=False)))
        response = await llm.complete(ROUND_2)
    assert response.usage.prompt_tokens is None and response.usage.total_tokens is None


async def test_sampling_options_and_extra_body_are_sent() -> None:
    options = {"max_tokens": 256, "temperature": 0.0, "seed": 7, "extra_body": {"top_k": 1, "cache_prompt": True}}
    async with provider(**options) as (server, llm, _):
        server.add(Reply(sse=text_stream("ok")))
        await llm.complete(ROUND_2)
    body = server.requests[0].json
    assert (body["max_tokens"], body["temperature"], body["seed"]) == (256, 0.0, 7)
    assert (body["top_k"], body["cache_prompt"]) == (1, True)


async def test_unset_sampling_options_are_not_sent() -> None:
    async with provider() as (server, llm, _):
        server.add(Reply(sse=text_stream("ok")))
        await llm.complete(ROUND_2)
    assert not {"max_tokens", "temperature", "seed"} & set(server.requests[0].json)


async def test_a_key_straddling_the_error_text_cut_never_leaves_a_piece_in_the_message() -> None:
    body = {
        "error": {"message": "x" * 470 + f" invalid api key {KEY} " + "y" * 3000}
    }  # the old cut at 500 fell inside the key
    async with provider() as (server, llm, _):
        server.add(Reply(status=401, json=body))
        with pytest.raises(ModelError) as caught:
            await llm.complete(ROUND_2)
    assert KEY[:12] not in caught.value.message and KEY[-12:] not in caught.value.message
    assert "***" in caught.value.message


async def test_a_key_split_across_malformed_stream_chunks_is_masked() -> None:
    half = len(KEY) // 2
    async with provider(max_attempts=1) as (server, llm, retries):
        server.add(Reply(sse=[f"not json {KEY[:half]}", f"{KEY[half:]} more"]))
        server.add(Reply(body=f"not json either {KEY[:half]}".encode()))
        with pytest.raises(ModelError) as caught:
            await llm.complete(ROUND_2)
    assert "malformed stream chunk" in retries[0]
    assert KEY[:half] not in retries[0]
    assert KEY[:half] not in caught.value.message


async def test_a_key_echoed_in_streamed_text_split_across_deltas_never_reaches_on_text() -> None:
    seen: list[str] = []

    async def on_text(delta: str) -> None:
        seen.append(delta)

    half = len(KEY) // 2
    async with provider() as (server, llm, _):
        server.add(Reply(sse=text_stream("the key is ", KEY[:half], KEY[half:], " ok")))
        response = await llm.complete(ROUND_2, on_text=on_text)
    assert "".join(seen) == "the key is *** ok" == response.text
    assert not any(KEY[:8] in piece or KEY[half : half + 8] in piece for piece in seen)
