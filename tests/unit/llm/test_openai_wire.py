"""The OpenAI provider's pure helpers: SSE framing, chunk assembly, Retry-After, error text, config."""

from __future__ import annotations

from collections.abc import AsyncIterator
from email.utils import formatdate

import pytest

from agent_server.errors import ConfigError
from agent_server.llm import _openai_wire, _responses_wire
from agent_server.llm._openai_wire import (
    ERROR_TEXT_MAX,
    StreamAssembler,
    error_text,
    is_validation_error,
    parse_arguments,
    retry_after_s,
)
from agent_server.llm._secret import Secret, StreamMask
from agent_server.llm._sse import iter_sse_data
from agent_server.llm.base import ModelRequest
from agent_server.llm.openai import OpenAIChatLLM
from agent_server.settings import OpenAIOptions
from agent_server.types import Message, ToolCall


async def _lines(*lines: str) -> AsyncIterator[str]:
    for line in lines:
        yield line


@pytest.mark.anyio
async def test_sse_joins_data_lines_skips_comments_and_keeps_a_last_unterminated_event() -> None:
    lines = _lines(": keep-alive", "", "event: message", 'data: {"a":', "data:1}", "id: 7", "", "", "data: [DONE]")
    assert [data async for data in iter_sse_data(lines)] == ['{"a":\n1}', "[DONE]"]


def test_retry_after_accepts_seconds_milliseconds_and_http_dates() -> None:
    now = 1_700_000_000.0
    assert retry_after_s({"retry-after": "2.5"}) == 2.5
    assert retry_after_s({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_s({"retry-after": formatdate(now + 30, usegmt=True)}, now=now) == pytest.approx(30)
    assert retry_after_s({"retry-after": formatdate(now - 30, usegmt=True)}, now=now) == 0
    assert retry_after_s({"retry-after": "soon"}) is None
    assert retry_after_s({}) is None


def _same(text: str) -> str:
    return text


def test_error_text_prefers_the_servers_message() -> None:
    assert error_text(b'{"error": {"message": "bad model"}}', _same) == "bad model"
    assert error_text(b'{"error": "plain string"}', _same) == "plain string"
    assert error_text(b'{"detail": [{"loc": ["body"], "msg": "field required"}]}', _same).startswith('[{"loc"')
    assert error_text(b"", _same) == "(empty body)"


def test_a_long_error_text_loses_its_middle_and_keeps_its_last_line() -> None:
    body = "1 validation error for Request\n" + "union member failed\n" * 300 + "content: Input should be a string"
    text = error_text(body.encode(), _same)
    assert text.startswith("1 validation error for Request")
    assert text.endswith("content: Input should be a string")
    assert f"[... {len(body) - ERROR_TEXT_MAX} characters cut ...]" in text
    assert len(text) < ERROR_TEXT_MAX + 50


def test_the_key_is_masked_before_the_text_is_cut() -> None:
    key = "sk-" + "k" * 47
    body = ("x" * (ERROR_TEXT_MAX // 2 - 10) + key + "y" * 2000).encode()
    text = error_text(body, Secret(key).mask)
    assert "kkkk" not in text  # before: the cut kept the key's first 10 characters and the rest was never masked
    assert "***" in text


def test_a_key_split_across_chunks_is_masked_in_each() -> None:
    key = Secret("sk-proj-0123456789abcdefghij")
    first, second = "prefix sk-proj-01234", "56789abcdefghij suffix"
    assert key.mask_fragments(first) == "prefix ***"
    assert key.mask_fragments(second) == "*** suffix"
    assert key.mask_fragments("no key here sk-") == "no key here sk-"  # too short to say anything


def test_streamed_text_never_passes_the_key_on_even_split_across_deltas() -> None:
    key = "sk-proj-0123456789abcdefghij"
    mask = StreamMask(Secret(key))
    deltas = ["the key is sk-pr", "oj-0123", "456789abcdefghij", " and sk-", "not it"]
    out = [mask.feed(d) for d in deltas] + [mask.flush()]
    assert "".join(out) == "the key is *** and sk-not it"
    assert not any("0123" in piece for piece in out)


def test_validation_shaped_bodies_are_recognised() -> None:
    assert is_validation_error("1 validation error for CreateChatCompletionRequest")
    assert is_validation_error("[{'type': 'string_type', 'loc': ('body', 'messages', 1), 'msg': 'Input should be'}]")
    assert not is_validation_error("CUDA out of memory")
    assert not is_validation_error("upstream connect error or disconnect/reset before headers")


def test_arguments_parse_to_an_object_or_an_error() -> None:
    assert parse_arguments('{"a": 1}') == ({"a": 1}, None)
    assert parse_arguments("  ") == ({}, None)
    assert parse_arguments("null")[1] == "arguments must be a JSON object, not NoneType: 'null'"
    assert (parse_arguments("{oops")[1] or "").startswith("arguments are not valid JSON")


def test_tool_call_deltas_without_index_are_told_apart_by_id() -> None:
    assembler = StreamAssembler()
    deltas = [
        {"id": "a", "function": {"name": "one", "arguments": '{"x"'}},
        {"function": {"arguments": ": 1}"}},
        {"id": "b", "function": {"name": "two", "arguments": {"y": 2}}},
    ]
    for delta in deltas:
        assembler.feed({"model": "m", "choices": [{"delta": {"tool_calls": [delta]}}]})
    response = assembler.completion.to_response("m", {})
    assert response.tool_calls == [
        ToolCall(id="a", name="one", arguments={"x": 1}),
        ToolCall(id="b", name="two", arguments={"y": 2}),
    ]


@pytest.mark.parametrize("base_url", ["ftp://example.com/v1", "not a url", "http:///v1"])
def test_a_base_url_that_is_not_http_is_a_config_error(base_url: str) -> None:
    with pytest.raises(ConfigError):
        OpenAIChatLLM(OpenAIOptions(base_url=base_url), api_key=None, model="m")


def test_the_shown_url_drops_credentials_and_query() -> None:
    options = OpenAIOptions(base_url="https://user:pw@llm.example.com:8443/v1?tenant=7")
    llm = OpenAIChatLLM(options, api_key="k" * 20, model="m")
    assert repr(llm) == "OpenAIChatLLM(url='https://llm.example.com:8443/v1/chat/completions', model='m', api_key=set)"


def test_an_output_schema_is_asked_for_natively_by_both_openai_apis() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    request = ModelRequest(messages=[Message(role="user", content="count")], output_schema=schema)
    plain = ModelRequest(messages=[Message(role="user", content="count")])
    options = OpenAIOptions()
    described = {"name": "output", "schema": schema, "strict": False}
    chat = _openai_wire.build_body(request, model="m", options=options)
    assert chat["response_format"] == {"type": "json_schema", "json_schema": described}
    responses = _responses_wire.build_body(request, model="m", options=options, cache_key=False)
    assert responses["text"] == {"format": {"type": "json_schema", **described}}
    assert "response_format" not in _openai_wire.build_body(plain, model="m", options=options)
    assert "text" not in _responses_wire.build_body(plain, model="m", options=options, cache_key=False)
