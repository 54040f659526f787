"""Tool-call arguments nested 1,000 and 100,000 deep, from the scripted model and from an OpenAI-compatible
server: each such call is an error result for the model saying so, and the turn goes on to its answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.fakes.openai_server import Reply, call_delta, chunk, completion, usage_chunk
from tests.interaction.harness import MODES, connect
from tests.interaction.openai_harness import local

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("mode", MODES)]

DEPTHS = [1_000, 100_000]
TOO_DEEP = "nested deeper than 64 levels"


def objects(depth: int) -> str:
    """JSON text of objects nested `depth` deep: {"a": {"a": ... {} ...}}."""
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def arrays_in_an_object(depth: int) -> str:
    """An arguments object whose `path` holds arrays nested `depth - 1` deep."""
    return '{"path":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def nested_dict(depth: int) -> dict[str, Any]:
    """The same as `objects`, as a Python value (built without recursion)."""
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def deep_calls(depth: int) -> list[dict[str, Any]]:
    return [
        {"name": "read_file", "arguments": objects(depth)},
        {"name": "read_file", "arguments": arrays_in_an_object(depth)},
        {"name": "read_file", "arguments": {"path": "notes.txt", "deep": nested_dict(depth)}},
        {"name": "list_dir", "arguments": {}},  # a sound call in the same round still runs
    ]


def assert_went_on(record: dict[str, Any], bad_calls: int) -> None:
    assert record["status"] == "completed", record
    assert record["final_text"] == "I will send flatter arguments."
    lines = record["tool_calls"]
    assert [line["is_error"] for line in lines] == [True] * bad_calls + [False] * (len(lines) - bad_calls)
    assert all(TOO_DEEP in line["error"] for line in lines[:bad_calls]), lines


@pytest.mark.parametrize("depth", DEPTHS)
async def test_the_scripted_models_deep_arguments_are_error_results(tmp_path: Path, mode: str, depth: int) -> None:
    script = [
        {"tool_calls": deep_calls(depth)},
        {"expect_contains": TOO_DEEP, "content": "I will send flatter arguments."},
    ]
    async with connect(tmp_path, script, mode=mode) as h:
        with anyio.fail_after(10):
            result = await h.call("run_turn", {"prompt": "go"})
            again = await h.call("session_get", {"session_id": result.structured_content["session_id"]})
    assert result.is_error is False
    assert_went_on(result.structured_content, bad_calls=3)
    assert [t["status"] for t in again.structured_content["turns"]] == ["completed"]


def streamed_calls(depth: int) -> list[Any]:
    """A streamed answer with two tool calls whose argument strings arrive in pieces, then a sound one."""
    deep, arrays = objects(depth), arrays_in_an_object(depth)
    halves = [deep[: len(deep) // 2], deep[len(deep) // 2 :]]
    return [
        chunk(tool_calls=[call_delta(0, id="c1", name="read_file", arguments=halves[0])]),
        chunk(tool_calls=[call_delta(0, arguments=halves[1])]),
        chunk(tool_calls=[call_delta(1, id="c2", name="read_file", arguments=arrays)]),
        chunk(tool_calls=[call_delta(2, id="c3", name="list_dir", arguments="{}")]),
        chunk(finish_reason="tool_calls"),
        usage_chunk(10, 5),
    ]


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_an_openai_compatible_models_deep_arguments_are_error_results(
    tmp_path: Path, mode: str, depth: int, stream: bool
) -> None:
    answer = "I will send flatter arguments."
    async with local(tmp_path, mode, openai={"stream": stream}) as h:
        if stream:
            h.model.add(
                Reply(sse=streamed_calls(depth)), Reply(sse=[chunk(content=answer), chunk(finish_reason="stop")])
            )
        else:
            calls = [("c1", "read_file", objects(depth)), ("c2", "read_file", arrays_in_an_object(depth))]
            h.model.add(
                Reply(json=completion(None, tool_calls=[*calls, ("c3", "list_dir", "{}")])),
                Reply(json=completion(answer)),
            )
        record, _ = await h.turn("go")
        sent_back = [m for m in h.model.requests[-1].json["messages"] if m["role"] == "tool"]
    assert_went_on(record, bad_calls=2)
    assert [TOO_DEEP in m["content"] for m in sent_back] == [True, True, False]  # the model was told


async def test_deep_json_written_as_text_stays_the_answer(tmp_path: Path, mode: str) -> None:
    # 1,000 deep: short enough to be read for tool calls at all (a longer answer is never parsed).
    text = json.dumps({"name": "read_file"})[:-1] + ', "arguments": ' + objects(1_000) + "}"
    async with local(tmp_path, mode, openai={"stream": False, "parse_text_tool_calls": "auto"}) as h:
        h.model.add(Reply(json=completion(text)))
        record, _ = await h.turn("go")
    assert record["status"] == "completed" and record["final_text"] == text and record["tool_calls"] == []
