"""Why the model stopped, as the OpenAI-compatible provider reads it: an answer or a tool call cut at the token
limit (`finish_reason: "length"`) is never a silent `completed`.

Each test drives `run_turn` over an in-memory client, with the real OpenAI provider talking HTTP to
`tests/fakes/openai_server.py`, streamed and whole.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.openai_server import Reply, call_delta, chunk, completion, text_stream, usage_chunk
from tests.interaction.harness import MODES
from tests.interaction.openai_harness import local

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("mode", MODES)]

CUT = "The files are: a.txt, b.t"
CUT_ARGUMENTS = '{"path": "notes.txt", "content": "the first line\\nthe sec'


def cut_answer(stream: bool) -> Reply:
    if stream:
        return Reply(sse=text_stream("The files are: ", "a.txt, b.t", finish_reason="length"))
    return Reply(json=completion(CUT, finish_reason="length"))


def cut_call(stream: bool) -> Reply:
    if stream:
        first = call_delta(0, id="c1", name="write_file", arguments=CUT_ARGUMENTS[:10])
        rest = call_delta(0, arguments=CUT_ARGUMENTS[10:])
        return Reply(
            sse=[chunk(tool_calls=[first]), chunk(tool_calls=[rest]), chunk(finish_reason="length"), usage_chunk(9, 9)]
        )
    return Reply(json=completion(None, tool_calls=[("c1", "write_file", CUT_ARGUMENTS)], finish_reason="length"))


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_an_answer_cut_at_the_token_limit_ends_truncated_with_a_warning(
    tmp_path: Path, mode: str, stream: bool
) -> None:
    async with local(tmp_path, mode, openai={"stream": stream}) as h:
        h.model.add(cut_answer(stream))
        result = await h.client.call_tool("run_turn", {"prompt": "List the files", "detail": "full"})
    record = result.structured_content or {}
    assert record["status"] == "truncated", record
    assert record["final_text"] == CUT
    assert record["error"]["type"] == "max_tokens" and "cut at its output token limit" in record["error"]["message"]
    assert record["assistant_turns"][0]["stop_reason"] == "max_tokens"
    assert result.is_error is False
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith("[turn truncated] the model's answer was cut") and text.endswith(CUT)
    errors = [e for e in h.events.events if e["type"] == "error"]
    assert [e["error_type"] for e in errors] == ["max_tokens"]  # the warning a host with the events extension sees


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_a_tool_call_cut_at_the_token_limit_tells_the_model_so(tmp_path: Path, mode: str, stream: bool) -> None:
    async with local(tmp_path, mode, openai={"stream": stream}) as h:
        h.model.add(cut_call(stream), Reply(json=completion("I will write it in parts.")))
        record, _ = await h.turn("Write notes.txt")
    assert record["status"] == "completed", record
    (tool_round,) = record["tool_rounds"]
    (result,) = tool_round["tool_results"]
    told = result["content"][0]["text"]
    assert result["is_error"] and "cut at the token limit while writing the arguments" in told
    assert "JSON" not in told
    assert not (h.workspace / "notes.txt").exists()
    sent = h.model.requests[1].json["messages"][-1]
    assert sent["role"] == "tool" and sent["tool_call_id"] == "c1" and "cut at the token limit" in sent["content"]
    assert [t["stop_reason"] for t in record["assistant_turns"]] == ["max_tokens", "end_turn"]


async def test_every_chat_completions_finish_reason_is_recorded(tmp_path: Path, mode: str) -> None:
    call = ("c1", "list_dir", json.dumps({"path": "."}))
    async with local(tmp_path, mode, openai={"stream": False}) as h:
        h.model.add(
            Reply(json=completion(None, tool_calls=[call])),
            Reply(json=completion("Filtered.", finish_reason="content_filter")),
        )
        record, _ = await h.turn("List")
    assert [t["stop_reason"] for t in record["assistant_turns"]] == ["tool_use", "content_filter"]
    assert record["status"] == "completed"
    assert any("content filter" in s for s in h.statuses())
