"""run_turn end to end over an in-memory client, in both protocol eras."""

from __future__ import annotations

import base64
from pathlib import Path

import anyio
import pytest

from agent_server.types import ImagePart
from tests.interaction.harness import MODES, Progress, connect

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("mode", MODES)]


async def test_answer_without_tools_completes_and_creates_an_active_session(tmp_path: Path, mode: str) -> None:
    script = [{"content": "Hello there.", "usage": {"prompt_tokens": 11, "completion_tokens": 3}}]
    async with connect(tmp_path, script, mode=mode) as h:
        with anyio.fail_after(5):
            result = await h.call("run_turn", {"prompt": "Say hello", "detail": "full"})
            sessions = await h.call("session_list")
    record = result.structured_content
    assert result.is_error is False
    assert result.content[0].text == "Hello there."
    assert record["status"] == "completed"
    assert record["final_text"] == "Hello there."
    assert record["usage"]["total_tokens"] == 14
    assert record["assistant_turns"][0]["phase"] == "initial"
    assert record["transitions"][-1] == {
        "from": "sampling",
        "to": "finalizing",
        "reason": "assistant_finished_without_tools",
    }
    assert record["started_at"] <= record["finished_at"]
    listed = sessions.structured_content["sessions"]
    assert [s["session_id"] for s in listed] == [record["session_id"]]
    assert listed[0]["active"] is True and listed[0]["turn_count"] == 1


async def test_tool_round_feeds_file_content_to_the_next_model_call(tmp_path: Path, mode: str) -> None:
    script = [
        {"content": "Let me read it.", "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"expect_contains": "the secret is 42", "content": "The secret is 42."},
    ]
    async with connect(tmp_path, script, mode=mode) as h:
        (h.workspace / "notes.txt").write_text("line one\nthe secret is 42\n")
        with anyio.fail_after(5):
            result = await h.call("run_turn", {"prompt": "What is the secret?", "detail": "full"})
    record = result.structured_content
    assert record["status"] == "completed", record
    assert record["final_text"] == "The secret is 42."
    (round_1,) = record["tool_rounds"]
    assert round_1["requested_tools"][0]["name"] == "read_file"
    assert round_1["tool_results"][0]["is_error"] is False
    assert [t["reason"] for t in record["transitions"]] == [
        "assistant_requested_tools",
        "tool_round_completed",
        "runtime_continuation_after_tools",
        "assistant_finished_without_tools",
    ]
    assert [a["phase"] for a in record["assistant_turns"]] == ["initial", "followup_1"]


async def test_history_carries_over_to_the_next_turn(tmp_path: Path, mode: str) -> None:
    script = [
        {"content": "Noted: blue."},
        {"expect_contains": ["My favourite colour is blue", "Noted: blue."], "content": "Blue."},
    ]
    async with connect(tmp_path, script, mode=mode) as h:
        await h.call("run_turn", {"prompt": "My favourite colour is blue"})
        result = await h.call("run_turn", {"prompt": "What is my favourite colour?"})
    assert result.structured_content["status"] == "completed", result.structured_content


async def test_max_tool_passes_halts_the_turn(tmp_path: Path, mode: str) -> None:
    call = {"tool_calls": [{"name": "list_dir", "arguments": {}}]}
    async with connect(tmp_path, [call, call, {"content": "next turn works"}], mode=mode) as h:
        result = await h.call("run_turn", {"prompt": "loop", "max_tool_passes": 1})
        after = await h.call("run_turn", {"prompt": "again"})
    record = result.structured_content
    assert result.is_error is False
    assert record["status"] == "halted"
    assert record["error"]["type"] == "max_tool_passes"
    assert [(c["round"], c["name"]) for c in record["tool_calls"]] == [(1, "list_dir")]
    assert result.content[0].text.startswith("[turn halted]")
    assert after.structured_content["final_text"] == "next turn works"


async def test_model_failure_fails_the_turn_and_the_session_stays_usable(tmp_path: Path, mode: str) -> None:
    script = [{"error": {"message": "upstream exploded"}}, {"content": "fine again"}]
    async with connect(tmp_path, script, mode=mode) as h:
        failed = await h.call("run_turn", {"prompt": "hi"})
        ok = await h.call("run_turn", {"prompt": "hi again"})
    assert failed.is_error is True
    assert failed.structured_content["status"] == "failed"
    assert failed.structured_content["error"] == {"type": "model_error", "message": "upstream exploded"}
    assert "upstream exploded" in failed.content[0].text
    assert ok.structured_content["status"] == "completed"


async def test_script_exhaustion_is_a_clear_model_error(tmp_path: Path, mode: str) -> None:
    async with connect(tmp_path, [], mode=mode) as h:
        result = await h.call("run_turn", {"prompt": "hi"})
    assert result.structured_content["status"] == "failed"
    assert "exhausted" in result.structured_content["error"]["message"]


async def test_timeout_ends_the_turn_as_timed_out(tmp_path: Path, mode: str) -> None:
    script = [{"delay_s": 30, "content": "too late"}, {"content": "on time"}]
    async with connect(tmp_path, script, mode=mode) as h:
        result = await h.call("run_turn", {"prompt": "slow", "timeout_s": 0.2})
        after = await h.call("run_turn", {"prompt": "fast"})
    record = result.structured_content
    assert record["status"] == "timed_out"
    assert record["error"]["type"] == "timed_out"
    assert after.structured_content["final_text"] == "on time"


async def test_cancelled_turn_is_recorded_and_the_next_turn_works(tmp_path: Path, mode: str) -> None:
    script = [{"delay_s": 60, "content": "never"}, {"content": "after cancel"}]
    sampling = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if message and message.startswith("sampling"):
            sampling.set()

    async with connect(tmp_path, script, mode=mode) as h:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:

                async def slow_turn() -> None:
                    await h.call("run_turn", {"prompt": "slow one"}, progress_callback=on_progress)

                tg.start_soon(slow_turn)
                await sampling.wait()
                tg.cancel_scope.cancel()
            after = await h.call("run_turn", {"prompt": "next"})
            session = await h.call("session_get", {"session_id": after.structured_content["session_id"]})
    assert after.structured_content["final_text"] == "after cancel"
    statuses = [t["status"] for t in session.structured_content["turns"]]
    assert statuses == ["cancelled", "completed"]


async def test_extended_trace_keeps_reasoning_and_standard_drops_it(tmp_path: Path, mode: str) -> None:
    script = [{"content": "a", "reasoning": "thinking hard"}, {"content": "b", "reasoning": "more thought"}]
    async with connect(tmp_path, script, mode=mode) as h:
        extended = await h.call("run_turn", {"prompt": "x", "trace": "extended", "detail": "full"})
        standard = await h.call("run_turn", {"prompt": "y", "detail": "full"})
    assert extended.structured_content["assistant_turns"][0]["reasoning"] == "thinking hard"
    assert standard.structured_content["assistant_turns"][0]["reasoning"] is None


async def test_trace_id_comes_from_request_meta(tmp_path: Path, mode: str) -> None:
    async with connect(tmp_path, [{"content": "a"}, {"content": "b"}], mode=mode) as h:
        given = await h.call("run_turn", {"prompt": "x"}, meta={"trace_id": "trace-from-caller"})
        fresh = await h.call("run_turn", {"prompt": "y"})
    assert given.structured_content["trace_id"] == "trace-from-caller"
    assert fresh.structured_content["trace_id"].startswith("trace_")
    assert {e["trace_id"] for e in h.events.events if e["turn_id"] == given.structured_content["turn_id"]} == {
        "trace-from-caller"
    }


async def test_image_tool_results_reach_the_model_as_images(tmp_path: Path, mode: str) -> None:
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    )
    script = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "dot.png"}}]}, {"content": "a dot"}]
    async with connect(tmp_path, script, mode=mode) as h:
        (h.workspace / "dot.png").write_bytes(png)
        with anyio.fail_after(5):
            result = await h.call("run_turn", {"prompt": "look"})
    assert result.structured_content["status"] == "completed"
    second_call = h.llm.calls[1]
    images = [
        p for m in second_call.messages if isinstance(m.content, list) for p in m.content if isinstance(p, ImagePart)
    ]
    assert len(images) == 1 and images[0].mime_type == "image/png"


async def test_tools_allow_list_hides_other_tools(tmp_path: Path, mode: str) -> None:
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "x"}}]},
        {"expect_contains": "read_file", "content": "could not read"},
    ]
    async with connect(tmp_path, script, mode=mode) as h:
        result = await h.call("run_turn", {"prompt": "x", "tools": ["list_*"]})
    record = result.structured_content
    assert [t.name for t in h.llm.calls[0].tools] == ["list_dir"]
    (line,) = record["tool_calls"]
    assert (line["name"], line["is_error"]) == ("read_file", True)
    assert "unknown tool" in line["error"]


async def test_invalid_tool_arguments_from_the_model_become_an_error_result(tmp_path: Path, mode: str) -> None:
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": "{not json"}]},
        {"expect_contains": "invalid arguments", "content": "sorry"},
    ]
    async with connect(tmp_path, script, mode=mode) as h:
        result = await h.call("run_turn", {"prompt": "x"})
    assert result.structured_content["status"] == "completed", result.structured_content


async def test_progress_is_strictly_increasing_with_one_line_messages(tmp_path: Path, mode: str) -> None:
    script = [
        {"content": "reading", "tool_calls": [{"name": "list_dir", "arguments": {}}]},
        {"content": "done " * 50},
    ]
    progress = Progress()
    async with connect(tmp_path, script, mode=mode) as h:
        await h.call("run_turn", {"prompt": "x"}, progress_callback=progress)
    values = [p for p, _, _ in progress.updates]
    assert values == sorted(set(values)) and len(values) >= 6
    assert all("\n" not in m for m in progress.messages)
    assert progress.messages[0].startswith("turn ")
    assert "sampling (round 1)" in progress.messages
    assert any(m.startswith("list_dir: ok in") for m in progress.messages)
    assert progress.messages[-1] == "done: completed"


async def test_timeout_s_counts_the_time_queued_behind_another_turn(tmp_path: Path, mode: str) -> None:
    script = [{"delay_s": 5, "content": "slow"}, {"content": "never sampled"}]
    sampling = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if (message or "").startswith("sampling"):
            sampling.set()

    async with connect(tmp_path, script, mode=mode) as h:
        session = (await h.call("session_create", {"title": "s"})).structured_content["session_id"]
        with anyio.fail_after(4):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: h.call("run_turn", {"prompt": "slow"}, progress_callback=on_progress))
                await sampling.wait()
                queued = await h.call("run_turn", {"prompt": "quick", "session_id": session, "timeout_s": 0.3})
                tg.cancel_scope.cancel()  # the slow turn is still running: the queued one ended first
    record = queued.structured_content
    assert record["status"] == "timed_out", record
    assert "queueing included" in record["error"]["message"]
    assert len(h.llm.calls) == 1, "the queued turn never reached the model"


async def test_arguments_nested_500_deep_are_an_error_result_for_the_model(tmp_path: Path, mode: str) -> None:
    deep: dict[str, object] = {}
    inner = deep
    for _ in range(500):
        inner["a"] = {}
        inner = inner["a"]  # pyright: ignore[reportAssignmentType]
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "x", "deep": deep}}]},
        {"expect_contains": "nested deeper than", "content": "I will send flatter arguments."},
    ]
    async with connect(tmp_path, script, mode=mode) as h:
        with anyio.fail_after(5):
            result = await h.call("run_turn", {"prompt": "go"})
            session = await h.call("session_get", {"session_id": result.structured_content["session_id"]})
    record = result.structured_content
    assert (result.is_error, record["status"]) == (False, "completed"), record
    (line,) = record["tool_calls"]
    assert line["is_error"] is True and "nested deeper than" in line["error"]
    assert [t["status"] for t in session.structured_content["turns"]] == ["completed"]
