from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import anyio
import pytest

from agent_server.errors import ConfigError, ModelError
from agent_server.llm.base import ModelRequest
from agent_server.llm.scripted import ScriptedLLM, stream_chunks
from agent_server.types import Message

pytestmark = pytest.mark.anyio


def request(*texts: str, model: str | None = None) -> ModelRequest:
    return ModelRequest(messages=[Message(role="user", content=text) for text in texts], model=model)


async def test_responses_are_replayed_in_order_with_usage_reasoning_and_tool_calls() -> None:
    llm = ScriptedLLM(
        [
            {"content": "Let me look.", "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
            {
                "content": "Done.",
                "reasoning": "it said hello",
                "usage": {"prompt_tokens": 10, "completion_tokens": 3},
                "tool_calls": [{"name": "list_dir", "id": "mine"}, {"name": "list_dir"}],
            },
        ]
    )
    assert llm.name == "script"
    assert llm.remaining == 2

    first = await llm.complete(request("hi"))
    assert first.text == "Let me look."
    assert [(c.id, c.name, c.arguments) for c in first.tool_calls] == [("call_1", "read_file", {"path": "a.txt"})]
    assert first.usage.total_tokens == 0

    second = await llm.complete(
        request("hi", "again"),
    )
    assert second.text == "Done."
    assert second.reasoning == "it said hello"
    assert (second.usage.prompt_tokens, second.usage.completion_tokens, second.usage.total_tokens) == (10, 3, 13)
    assert [c.id for c in second.tool_calls] == ["mine", "call_3"]
    assert llm.remaining == 0
    assert [len(c.messages) for c in llm.calls] == [1, 2]
    llm.assert_complete()


async def test_response_reports_the_requested_model_or_the_script() -> None:
    llm = ScriptedLLM([{"content": "a"}, {"content": "b"}])
    assert (await llm.complete(request("x", model="gpt-test"))).model == "gpt-test"
    assert (await llm.complete(request("x"))).model == "script"


async def test_exhausted_script_raises_model_error() -> None:
    llm = ScriptedLLM([{"content": "only"}])
    await llm.complete(request("one"))
    with pytest.raises(ModelError, match="script exhausted: all 1 responses used"):
        await llm.complete(request("two"))
    assert len(llm.calls) == 2


async def test_exhaustion_message_says_how_to_keep_answering(tmp_path: Path) -> None:
    path = write_script(tmp_path, {"responses": [{"content": "only"}]})
    llm = ScriptedLLM.from_file(path)
    await llm.complete(request("one"))
    with pytest.raises(ModelError) as info:
        await llm.complete(request("two"))
    message = info.value.message
    assert str(path) in message
    assert '"when_exhausted"' in message and '"repeat_last"' in message and '"cycle"' in message


async def test_repeat_last_answers_with_the_last_response_after_the_script_ends(tmp_path: Path) -> None:
    script = {"when_exhausted": "repeat_last", "responses": [{"content": "first"}, {"content": "again"}]}
    llm = ScriptedLLM.from_file(write_script(tmp_path, script))
    answers = [(await llm.complete(request(str(n)))).text for n in range(5)]
    assert answers == ["first", "again", "again", "again", "again"]
    assert llm.remaining == 0
    llm.assert_complete()


async def test_cycle_starts_over_and_keeps_generated_tool_call_ids_unique() -> None:
    tool_round = {"tool_calls": [{"name": "list_dir"}, {"name": "read_file", "id": "mine"}]}
    llm = ScriptedLLM([tool_round, {"content": "answer"}], when_exhausted="cycle")
    responses = [await llm.complete(request(str(n))) for n in range(5)]
    assert [r.text for r in responses] == ["", "answer", "", "answer", ""]
    ids = [[call.id for call in r.tool_calls] for r in responses if r.tool_calls]
    assert ids == [["call_1", "mine"], ["call_3", "mine"], ["call_5", "mine"]]


async def test_replayed_responses_still_check_their_expectations() -> None:
    llm = ScriptedLLM([{"expect_contains": "needle", "content": "found"}], when_exhausted="repeat_last")
    assert (await llm.complete(request("a needle"))).text == "found"
    with pytest.raises(ModelError, match="script response 0: the request does not contain 'needle'"):
        await llm.complete(request("nothing here"))


def test_remaining_counts_unused_responses_for_a_replaying_script() -> None:
    llm = ScriptedLLM([{"content": "a"}, {"content": "b"}], when_exhausted="cycle")
    assert llm.remaining == 2
    with pytest.raises(AssertionError, match="2 of 2"):
        llm.assert_complete()


@pytest.mark.parametrize("policy", ["repeat_last", "cycle"])
def test_a_replaying_script_needs_a_response(tmp_path: Path, policy: str) -> None:
    path = write_script(tmp_path, {"when_exhausted": policy, "responses": []})
    with pytest.raises(ConfigError, match=f'"when_exhausted": "{policy}" needs at least one response'):
        ScriptedLLM.from_file(path)


@pytest.mark.parametrize("value", ["loop", None, 3])
def test_an_unknown_when_exhausted_is_a_config_error_listing_the_choices(tmp_path: Path, value: object) -> None:
    path = write_script(tmp_path, {"when_exhausted": value, "responses": [{"content": "a"}]})
    with pytest.raises(ConfigError) as info:
        ScriptedLLM.from_file(path)
    assert str(path) in info.value.message
    assert '"when_exhausted" must be one of "fail", "repeat_last", "cycle"' in info.value.message


async def test_when_exhausted_fail_is_the_default_and_can_be_written(tmp_path: Path) -> None:
    llm = ScriptedLLM.from_file(write_script(tmp_path, {"when_exhausted": "fail", "responses": []}))
    assert llm.when_exhausted == "fail"
    with pytest.raises(ModelError, match="script exhausted"):
        await llm.complete(request("x"))


def write_script(tmp_path: Path, script: Mapping[str, object]) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script), encoding="utf-8")
    return path


async def test_assert_complete_fails_when_responses_are_left() -> None:
    llm = ScriptedLLM([{"content": "a"}, {"content": "b"}])
    await llm.complete(request("x"))
    with pytest.raises(AssertionError, match="1 of 2"):
        llm.assert_complete()


async def test_expect_contains_miss_names_the_missing_strings_and_the_index() -> None:
    llm = ScriptedLLM([{"content": "a"}, {"expect_contains": ["present", "absent one", "also absent"]}])
    await llm.complete(request("x"))
    with pytest.raises(ModelError) as info:
        await llm.complete(request("present here"))
    message = info.value.message
    assert "script response 1" in message
    assert "'absent one'" in message and "'also absent'" in message
    assert "'present'" not in message
    assert llm.remaining == 0  # consumed even though it failed


async def test_expect_contains_matches_plain_text_with_quotes_and_newlines() -> None:
    text = 'He said "hello"\nthen left'
    llm = ScriptedLLM([{"expect_contains": text, "content": "ok"}])
    assert (await llm.complete(request(text))).text == "ok"


async def test_expect_contains_matches_the_json_of_tool_calls() -> None:
    llm = ScriptedLLM([{"expect_contains": ['"path": "a.txt"', "read_file"], "content": "ok"}])
    assistant = Message.model_validate(
        {"role": "assistant", "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "a.txt"}}]}
    )
    assert (await llm.complete(ModelRequest(messages=[assistant]))).text == "ok"


async def test_error_response_raises_model_error_with_its_message() -> None:
    llm = ScriptedLLM([{"error": {"message": "provider down"}}, {"content": "recovered"}])
    with pytest.raises(ModelError, match="^provider down$"):
        await llm.complete(request("x"))
    assert (await llm.complete(request("x"))).text == "recovered"


async def test_error_response_streams_its_content_before_failing() -> None:
    llm = ScriptedLLM([{"content": "partial answer that breaks", "error": {"message": "stream cut"}}])
    chunks: list[str] = []

    async def on_text(delta: str) -> None:
        chunks.append(delta)

    with pytest.raises(ModelError, match="stream cut"):
        await llm.complete(request("x"), on_text=on_text)
    assert "".join(chunks) == "partial answer that breaks"


async def test_delay_cancelled_still_consumes_the_response() -> None:
    llm = ScriptedLLM([{"delay_s": 60, "content": "slow"}, {"content": "next"}])
    with anyio.fail_after(5):
        with anyio.move_on_after(0.01) as scope:
            await llm.complete(request("x"))
        assert scope.cancelled_caught
        assert llm.remaining == 1
        assert (await llm.complete(request("y"))).text == "next"


async def test_delay_waits_then_answers() -> None:
    llm = ScriptedLLM([{"delay_s": 0.01, "content": "late"}])
    with anyio.fail_after(5):
        assert (await llm.complete(request("x"))).text == "late"


async def test_json_string_arguments_are_parsed() -> None:
    llm = ScriptedLLM([{"tool_calls": [{"name": "t", "arguments": '{"a": 1, "b": "two"}'}]}])
    (call,) = (await llm.complete(request("x"))).tool_calls
    assert call.arguments == {"a": 1, "b": "two"}
    assert call.arguments_error is None


@pytest.mark.parametrize(
    ("raw", "problem"),
    [('{"a": ', "not valid JSON"), ("[1, 2]", "must be a JSON object, not list"), ('"text"', "not str")],
)
async def test_invalid_json_string_arguments_give_an_arguments_error(raw: str, problem: str) -> None:
    llm = ScriptedLLM([{"tool_calls": [{"name": "t", "arguments": raw}]}])
    (call,) = (await llm.complete(request("x"))).tool_calls
    assert call.arguments == {}
    assert call.arguments_error is not None and problem in call.arguments_error


async def test_streamed_chunks_join_to_the_content() -> None:
    content = "The quick brown fox jumps over the lazy dog.\n  Then it sleeps, and so should you."
    llm = ScriptedLLM([{"content": content}])
    chunks: list[str] = []

    async def on_text(delta: str) -> None:
        chunks.append(delta)

    response = await llm.complete(request("x"), on_text=on_text)
    assert response.text == content
    assert "".join(chunks) == content
    assert len(chunks) > 2
    assert all(len(chunk) >= 16 for chunk in chunks[:-1])


@pytest.mark.parametrize("text", ["", " ", "word", "  leading and trailing  ", "a\n\nb\tc " * 10])
def test_stream_chunks_are_lossless(text: str) -> None:
    assert "".join(stream_chunks(text)) == text


def test_from_file_loads_a_script(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"responses": [{"content": "a"}, {"content": "b"}]}), encoding="utf-8")
    assert ScriptedLLM.from_file(path).remaining == 2


def test_from_file_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read script file .*missing.json"):
        ScriptedLLM.from_file(tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", "is not valid JSON"),
        ("[]", "must hold an object"),
        ('{"steps": []}', "must hold an object"),
        ('{"responses": [], "extra": 1}', "unknown top-level key(s) 'extra'"),
    ],
)
def test_from_file_invalid_file_is_a_config_error(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "script.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        ScriptedLLM.from_file(path)
    assert problem in info.value.message
    assert str(path) in info.value.message


def test_extra_key_is_rejected_naming_the_key_and_index(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"responses": [{"content": "a"}, {"content": "b", "contnet": "typo"}]}))
    with pytest.raises(ConfigError) as info:
        ScriptedLLM.from_file(path)
    assert "response 1: unknown key 'contnet'" in info.value.message


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"tool_calls": [{"arguments": {}}]}, "response 0: tool_calls.0.name: Field required"),
        ({"tool_calls": [{"name": "t", "args": {}}]}, "response 0: tool_calls.0: unknown key 'args'"),
        ({"delay_s": -1}, "response 0: delay_s"),
        ({"usage": {"prompt_tokens": 1, "cached": 2}}, "response 0: usage: unknown key 'cached'"),
        ({"error": {"message": "x"}, "tool_calls": [{"name": "t"}]}, "cannot also have"),
        ({"error": {}}, "response 0: error.message: Field required"),
        ("not an object", "response 0"),
    ],
)
def test_bad_response_entries_are_config_errors(entry: object, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        ScriptedLLM([entry])  # type: ignore[list-item]
    assert problem in info.value.message


def test_a_script_file_nested_too_deep_is_a_config_error_saying_how_to_write_it(tmp_path: Path) -> None:
    deep = '{"a":' * 100_000 + "{}" + "}" * 100_000
    path = tmp_path / "deep.json"
    path.write_text('{"responses": [{"tool_calls": [{"name": "t", "arguments": ' + deep + "}]}]}")
    with pytest.raises(ConfigError, match="nested deeper than 256 levels.*as a JSON string"):
        ScriptedLLM.from_file(path)
