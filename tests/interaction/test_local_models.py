"""Tool-using turns against a fake local OpenAI-compatible server with the quirks of llama.cpp-class servers.

Each test drives `run_turn` over an in-memory client, with the real OpenAI provider talking HTTP to
`tests/fakes/openai_server.py` (`openai_harness.local`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import Quirks, Reply, completion
from tests.interaction.harness import MODES
from tests.interaction.openai_harness import local

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("mode", MODES)]


def read_call(path: str = "notes.txt") -> dict[str, Any]:
    return completion(None, tool_calls=[("c1", "read_file", json.dumps({"path": path}))])


async def test_a_tool_using_turn_passes_on_a_server_that_rejects_null_and_cannot_stream_tools(
    tmp_path: Path, mode: str
) -> None:
    quirks = Quirks(reject_null_content=True, no_streamed_tools=True)
    async with local(tmp_path, mode, quirks) as h:
        (h.workspace / "notes.txt").write_text("the answer is 42\n")
        h.model.add(Reply(json=read_call()), Reply(json=completion("It is 42.")))
        record, progress = await h.turn("What is the answer?")
    assert record["status"] == "completed", record
    assert record["final_text"] == "It is 42."
    assert [r.json["stream"] for r in h.model.requests] == [True, False, False]  # one fallback, then whole answers
    second = h.model.requests[2].json["messages"]
    assert second[-2]["role"] == "assistant" and second[-2]["content"] == ""
    assert "the answer is 42" in second[-1]["content"]
    assert any("retrying once without streaming" in m for m in progress.messages)


TEXT_CALL = '{"name": "read_file", "arguments": {"path": "notes.txt"}}'


@pytest.mark.parametrize(
    "answer",
    [TEXT_CALL, f"```json\n{TEXT_CALL}\n```", f"<tool_call>\n{TEXT_CALL}\n</tool_call>"],
    ids=["bare", "fenced", "tagged"],
)
async def test_tool_calls_written_as_text_are_run_with_parse_text_tool_calls_auto(
    tmp_path: Path, mode: str, answer: str
) -> None:
    async with local(tmp_path, mode, openai={"stream": False, "parse_text_tool_calls": "auto"}) as h:
        (h.workspace / "notes.txt").write_text("the answer is 42\n")
        h.model.add(Reply(json=completion(answer)), Reply(json=completion("It is 42.")))
        record, _ = await h.turn("What is the answer?")
    assert record["status"] == "completed", record
    (tool_round,) = record["tool_rounds"]
    assert tool_round["requested_tools"][0]["name"] == "read_file"
    assert tool_round["requested_tools"][0]["arguments"] == {"path": "notes.txt"}
    assert h.model.requests[1].json["messages"][-2]["content"] == ""  # the call is sent back as a call, not text
    assert "the answer is 42" in h.model.requests[1].json["messages"][-1]["content"]
    assert any("recovered from text: read_file" in m for m in h.statuses())


async def test_prose_that_contains_json_stays_the_answer(tmp_path: Path, mode: str) -> None:
    answer = f"To read it you would send {TEXT_CALL} to the server."
    async with local(tmp_path, mode, openai={"stream": False, "parse_text_tool_calls": "auto"}) as h:
        h.model.add(Reply(json=completion(answer)))
        record, _ = await h.turn("How?")
    assert record["status"] == "completed" and record["final_text"] == answer
    assert record["tool_rounds"] == []


async def test_text_tool_calls_are_an_answer_when_parsing_is_off(tmp_path: Path, mode: str) -> None:
    async with local(tmp_path, mode, openai={"stream": False}) as h:
        h.model.add(Reply(json=completion(TEXT_CALL)))
        record, _ = await h.turn("What is the answer?")
    assert record["final_text"] == TEXT_CALL and record["tool_rounds"] == []


async def test_a_big_file_read_is_cut_to_fit_a_small_window_and_the_next_request_is_accepted(
    tmp_path: Path, mode: str
) -> None:
    quirks = Quirks(context_tokens=4096)
    async with local(tmp_path, mode, quirks, openai={"stream": False}, context_window=4096) as h:
        (h.workspace / "big.txt").write_text("".join(f"line {i} of a long file\n" for i in range(4000)))  # ~90 KB
        h.model.add(Reply(json=read_call("big.txt")), Reply(json=completion("It is long.")))
        record, _ = await h.turn("Summarise big.txt")
    assert record["status"] == "completed", record
    tool_message = h.model.requests[1].json["messages"][-1]["content"]
    assert "[truncated to fit the model's context window" in tool_message and "offset/limit" in tool_message
    assert len(h.model.requests[1].body) // 4 <= 4096


def is_compaction(body: Any) -> bool:
    return "You compact the history" in body["messages"][0]["content"]


async def test_compaction_runs_between_rounds_when_the_next_request_would_not_fit(tmp_path: Path, mode: str) -> None:
    quirks = Quirks(context_tokens=2000)
    settings = {"context_window": 2000, "compact_keep_last": 2}
    async with local(tmp_path, mode, quirks, openai={"stream": False}, **settings) as h:
        for name in "abcd":
            (h.workspace / f"{name}.txt").write_text(name * 1900)  # each result takes about a quarter of the window
        h.model.add(Reply(json=completion("first turn done")), Reply(json=completion("second turn done")))
        await h.turn("x" * 2000)  # older turns in the history, worth compacting
        await h.turn("and now?")
        h.model.add(Reply(json=completion("the user sent a long x string"), match=is_compaction))
        h.model.add(*(Reply(json=read_call(f"{name}.txt")) for name in "abcd"))
        h.model.add(Reply(json=completion("read them all")))
        record, _ = await h.turn("Read a, b, c and d, one at a time")
    assert record["status"] == "completed", record
    assert record["final_text"] == "read them all"
    assert record["compaction"] is not None and record["compaction"]["compacted_message_count"] == 2
    statuses = h.statuses()
    assert "compacting context between tool rounds" in statuses
    assert any("elided from the request" in s for s in statuses)
    assert all(len(r.body) // 4 <= 2000 for r in h.model.requests)  # no request overflowed the window
    assert len(h.model.requests) == 2 + 5 + 1


async def test_unreported_usage_is_null_in_the_record(tmp_path: Path, mode: str) -> None:
    async with local(tmp_path, mode, openai={"stream": False}) as h:
        h.model.add(Reply(json=completion("ok", usage=False)))
        record, _ = await h.turn("Hi")
    assert record["usage"]["prompt_tokens"] is None and record["usage"]["total_tokens"] is None


async def test_an_empty_final_answer_is_a_warning(tmp_path: Path, mode: str, caplog: pytest.LogCaptureFixture) -> None:
    async with local(tmp_path, mode, openai={"stream": False}) as h:
        h.model.add(Reply(json=completion("")))
        record, _ = await h.turn("Hi")
    assert record["status"] == "completed" and record["final_text"] == ""
    assert "warning: the model's final answer is empty" in h.statuses()
    assert any("final answer is empty" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


async def test_a_failed_turn_leaves_one_info_line(tmp_path: Path, mode: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agent_server")
    async with local(tmp_path, mode, openai={"stream": False}) as h:
        h.model.add(Reply(status=400, json={"error": {"message": "bad request"}}))
        record, _ = await h.turn("Hi")
    assert record["status"] == "failed"
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO and "ended failed" in r.getMessage()]
    assert len(lines) == 1 and record["turn_id"] in lines[0] and "bad request" in lines[0]
