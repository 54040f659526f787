"""OpenAIChatLLM against a real HTTP server on 127.0.0.1: answers, tool calls, request mapping.

Failures, retries, timeouts and cancellation are in `test_openai_failures.py`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from agent_server.errors import ModelError
from agent_server.llm.base import ModelRequest, ModelResponse
from agent_server.llm.openai import OpenAIChatLLM
from agent_server.settings import OpenAIOptions, Price
from agent_server.types import ImagePart, Message, TextPart, ToolCall, ToolSpec, Usage
from tests.fakes.openai_server import (
    MODEL,
    FakeOpenAIServer,
    Reply,
    call_delta,
    chunk,
    completion,
    text_stream,
    usage_chunk,
)

pytestmark = pytest.mark.anyio

SYSTEM = Message(role="system", content="You are terse.")
USER = Message(role="user", content="What does a.txt say?")
READ_FILE = ToolSpec(
    name="read_file",
    description="Read a file in the workspace.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)

ROUND_1_SSE = [
    chunk(content=""),
    chunk(content="Let me "),
    chunk(content="look."),
    chunk(tool_calls=[call_delta(0, id="call_1", name="read_file")]),
    chunk(tool_calls=[call_delta(0, arguments='{"pa')]),
    chunk(tool_calls=[call_delta(0, arguments='th": "a.txt"}')]),
    chunk(finish_reason="tool_calls"),
    usage_chunk(50, 12),
]
ROUND_1_JSON = completion(
    "Let me look.", tool_calls=[("call_1", "read_file", '{"path": "a.txt"}')], prompt=50, completion_tokens=12
)
ROUND_2_SSE = text_stream("It says ", "hello.", prompt=70, completion=4)
ROUND_2_JSON = completion("It says hello.", prompt=70, completion_tokens=4)


@asynccontextmanager
async def provider(
    server: FakeOpenAIServer, *, api_key: str | None = "sk-test", **options: Any
) -> AsyncIterator[OpenAIChatLLM]:
    llm = OpenAIChatLLM(OpenAIOptions(base_url=server.base_url, **options), api_key=api_key, model="gpt-test")
    try:
        yield llm
    finally:
        await llm.aclose()


async def two_rounds(*, stream: bool) -> tuple[list[ModelResponse], list[str], FakeOpenAIServer]:
    """A tool-calling exchange: the model asks for read_file, gets its result, answers."""
    tokens: list[str] = []

    async def on_text(text: str) -> None:
        tokens.append(text)

    async with FakeOpenAIServer() as server, provider(server, stream=stream) as llm:
        if stream:
            server.add(Reply(sse=ROUND_1_SSE), Reply(sse=ROUND_2_SSE))
        else:
            server.add(Reply(json=ROUND_1_JSON), Reply(json=ROUND_2_JSON))
        with anyio.fail_after(5):
            first = await llm.complete(ModelRequest(messages=[SYSTEM, USER], tools=[READ_FILE]), on_text=on_text)
            call = first.tool_calls[0]
            history = [
                SYSTEM,
                USER,
                Message(role="assistant", content=first.text, tool_calls=first.tool_calls),
                Message(role="tool", tool_call_id=call.id, name=call.name, content="hello"),
            ]
            second = await llm.complete(ModelRequest(messages=history, tools=[READ_FILE]), on_text=on_text)
    return [first, second], tokens, server


async def test_two_round_tool_exchange_streamed_and_whole_give_identical_responses() -> None:
    streamed, streamed_tokens, _ = await two_rounds(stream=True)
    whole, whole_tokens, _ = await two_rounds(stream=False)

    assert streamed == whole
    assert streamed[0] == ModelResponse(
        text="Let me look.",
        tool_calls=[ToolCall(id="call_1", name="read_file", arguments={"path": "a.txt"})],
        usage=Usage(prompt_tokens=50, completion_tokens=12, total_tokens=62),
        model=MODEL,
        stop_reason="tool_use",
    )
    assert streamed[1] == ModelResponse(
        text="It says hello.",
        usage=Usage(prompt_tokens=70, completion_tokens=4, total_tokens=74),
        model=MODEL,
        stop_reason="end_turn",
    )
    assert streamed_tokens == ["Let me ", "look.", "It says ", "hello."]
    assert whole_tokens == ["Let me look.", "It says hello."]


async def test_the_requests_carry_tools_tool_calls_and_tool_results() -> None:
    _, _, server = await two_rounds(stream=True)

    first, second = (r.json for r in server.requests)
    assert [r.path for r in server.requests] == ["/v1/chat/completions"] * 2
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"
    assert first["model"] == "gpt-test"
    assert first["stream"] is True
    assert first["stream_options"] == {"include_usage": True}
    assert first["tool_choice"] == "auto"
    assert first["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file in the workspace.",
                "parameters": READ_FILE.input_schema,
            },
        }
    ]
    assert first["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What does a.txt say?"},
    ]
    assert second["messages"][2:] == [
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
    ]


async def test_the_whole_mode_request_has_no_stream_options() -> None:
    _, _, server = await two_rounds(stream=False)

    body = server.requests[0].json
    assert body["stream"] is False
    assert "stream_options" not in body
    assert server.connections == 1


async def test_a_finished_stream_leaves_the_connection_reusable() -> None:
    _, _, server = await two_rounds(stream=True)

    assert server.connections == 1


async def test_several_tool_calls_in_one_streamed_message_are_assembled_by_index() -> None:
    events = [
        chunk(content="Two files."),
        chunk(tool_calls=[call_delta(0, id="call_a", name="read_file", arguments="")]),
        chunk(tool_calls=[call_delta(0, arguments='{"path": '), call_delta(1, id="call_b", name="read_file")]),
        chunk(tool_calls=[call_delta(1, arguments='{"path": "b.txt"}')]),
        chunk(tool_calls=[call_delta(0, arguments='"a.txt"}')]),
        chunk(tool_calls=[call_delta(2, id="call_c", name="list_files", arguments="")]),
        chunk(finish_reason="tool_calls"),
        usage_chunk(30, 40),
    ]
    async with FakeOpenAIServer() as server, provider(server) as llm:
        server.add(Reply(sse=events))
        with anyio.fail_after(5):
            response = await llm.complete(ModelRequest(messages=[USER], tools=[READ_FILE]))

    assert response.text == "Two files."
    assert response.tool_calls == [
        ToolCall(id="call_a", name="read_file", arguments={"path": "a.txt"}),
        ToolCall(id="call_b", name="read_file", arguments={"path": "b.txt"}),
        ToolCall(id="call_c", name="list_files", arguments={}),
    ]


@pytest.mark.parametrize("stream", [True, False])
async def test_invalid_json_arguments_become_an_arguments_error(stream: bool) -> None:
    truncated, not_object = '{"path": "a.txt"', "[1, 2]"
    if stream:
        events = [
            chunk(tool_calls=[call_delta(0, id="call_1", name="read_file", arguments=truncated)]),
            chunk(tool_calls=[call_delta(1, id="call_2", name="read_file", arguments=not_object)]),
            usage_chunk(1, 1),
        ]
        reply = Reply(sse=events)
    else:
        calls = [("call_1", "read_file", truncated), ("call_2", "read_file", not_object)]
        reply = Reply(json=completion(None, tool_calls=calls))
    async with FakeOpenAIServer() as server, provider(server, stream=stream) as llm:
        server.add(reply)
        with anyio.fail_after(5):
            response = await llm.complete(ModelRequest(messages=[USER], tools=[READ_FILE]))

    first, second = response.tool_calls
    assert (first.id, first.arguments) == ("call_1", {})
    assert first.arguments_error is not None and "not valid JSON" in first.arguments_error
    assert (second.id, second.arguments) == ("call_2", {})
    assert second.arguments_error is not None and "must be a JSON object, not list" in second.arguments_error


@pytest.mark.parametrize("stream", [True, False])
async def test_reasoning_is_collected_and_cost_comes_from_the_price_table(stream: bool) -> None:
    if stream:
        events = [
            chunk(reasoning="Think"),
            {**chunk(), "choices": [{"index": 0, "delta": {"reasoning": "ing."}}]},
            chunk(content="Done."),
            usage_chunk(1_000_000, 500_000),
        ]
        reply = Reply(sse=events)
    else:
        reply = Reply(json=completion("Done.", reasoning="Thinking.", prompt=1_000_000, completion_tokens=500_000))
    prices = {MODEL: Price(input_per_mtok=2.0, output_per_mtok=8.0)}
    async with FakeOpenAIServer() as server, provider(server, stream=stream, prices=prices) as llm:
        server.add(reply)
        with anyio.fail_after(5):
            response = await llm.complete(ModelRequest(messages=[USER]))

    assert response.reasoning == "Thinking."
    assert response.text == "Done."
    assert response.usage.cost_usd == pytest.approx(2.0 + 4.0)


async def test_cost_falls_back_to_the_requested_model_and_is_none_without_a_price() -> None:
    prices = {"gpt-test": Price(input_per_mtok=1.0, output_per_mtok=1.0)}
    async with FakeOpenAIServer() as server, provider(server, prices=prices) as llm:
        server.add(Reply(sse=text_stream("a", prompt=10, completion=10)), Reply(sse=text_stream("b")))
        with anyio.fail_after(5):
            priced = await llm.complete(ModelRequest(messages=[USER]))
            unpriced = await llm.complete(ModelRequest(messages=[USER], model="other-model"))

    assert priced.model == MODEL
    assert priced.usage.cost_usd == pytest.approx(20 / 1e6)
    assert unpriced.usage.cost_usd is None
    assert server.requests[1].json["model"] == "other-model"


async def test_images_system_and_tool_messages_are_mapped_to_the_wire() -> None:
    png = ImagePart(data="iVBORw0KGgo=", mime_type="image/png")
    messages = [
        SYSTEM,
        Message(role="user", content=[TextPart(text="What is this?"), png], name="alice"),
        Message(role="assistant", tool_calls=[ToolCall(id="c1", name="screenshot"), ToolCall(id="c2", name="ls")]),
        Message(role="tool", tool_call_id="c1", content=[TextPart(text="captured"), png]),
        Message(role="tool", tool_call_id="c2", content=[TextPart(text="a.txt"), TextPart(text="b.txt")]),
        Message(role="user", content="Well?"),
    ]
    async with FakeOpenAIServer() as server, provider(server, api_key=None, stream=False) as llm:
        server.add(Reply(json=completion("A cat.")))
        with anyio.fail_after(5):
            await llm.complete(ModelRequest(messages=messages))

    request = server.requests[0]
    assert "authorization" not in request.headers
    assert "tools" not in request.json and "tool_choice" not in request.json
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    assert request.json["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "name": "alice", "content": [{"type": "text", "text": "What is this?"}, image]},
        {
            "role": "assistant",
            "content": "",  # not null: llama-cpp-python's server rejects null with HTTP 500
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "screenshot", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "captured"},
        {"role": "tool", "tool_call_id": "c2", "content": "a.txt\nb.txt"},
        {"role": "user", "content": [{"type": "text", "text": "Images returned by the tool calls above:"}, image]},
        {"role": "user", "content": "Well?"},
    ]


async def test_a_trailing_slash_in_the_base_url_and_a_json_answer_to_a_stream_request() -> None:
    async with FakeOpenAIServer() as server:
        llm = OpenAIChatLLM(OpenAIOptions(base_url=server.base_url + "/"), api_key=None, model="gpt-test")
        server.add(Reply(json=completion("Not streamed after all.")))
        with anyio.fail_after(5):
            response = await llm.complete(ModelRequest(messages=[USER]))
        await llm.aclose()

    assert server.requests[0].path == "/v1/chat/completions"
    assert response.text == "Not streamed after all."


async def test_credentials_in_the_base_url_reach_no_log_line_and_no_message(caplog: pytest.LogCaptureFixture) -> None:
    async with FakeOpenAIServer() as server:
        base_url = server.base_url.replace("http://", "http://alice:url-pass-9999@") + "?api-key=qkey-8888"
        llm = OpenAIChatLLM(OpenAIOptions(base_url=base_url, max_attempts=1), api_key="sk-key-7777", model="gpt-test")
        server.add(Reply(json=completion("fine")), Reply(status=401, json={"error": {"message": "bad key"}}))
        caplog.set_level(logging.DEBUG)
        with anyio.fail_after(5):
            assert (await llm.complete(ModelRequest(messages=[USER]))).text == "fine"
            with pytest.raises(ModelError) as failed:
                await llm.complete(ModelRequest(messages=[USER]))
        await llm.aclose()
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "HTTP Request: POST http://***@127.0.0.1" in logged and "?api-key=***" in logged, logged
    for secret in ("url-pass-9999", "qkey-8888", "sk-key-7777"):
        assert secret not in logged and secret not in failed.value.message and secret not in repr(llm)
