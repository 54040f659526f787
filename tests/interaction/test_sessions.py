"""session_* tools, compact and agent_tools end to end, in both protocol eras."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_server.tools.builtin import SPECS as READ_TOOLS
from tests.interaction.harness import MODES, connect

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("mode", MODES)]


async def test_create_list_switch_get_delete(tmp_path: Path, mode: str) -> None:
    async with connect(tmp_path, [{"content": "one"}], mode=mode) as h:
        first = (await h.call("session_create", {"title": "first", "metadata": {"k": 1}})).structured_content
        second = (await h.call("session_create", {"title": "second"})).structured_content
        await h.call("run_turn", {"prompt": "hi", "session_id": first["session_id"]})
        listed = (await h.call("session_list")).structured_content["sessions"]
        switched = (await h.call("session_switch", {"session_id": first["session_id"]})).structured_content
        got = (await h.call("session_get", {"include_history": True})).structured_content
        deleted = await h.call("session_delete", {"session_id": second["session_id"]})
        after = (await h.call("session_list")).structured_content["sessions"]
    assert second["active"] is True
    assert [s["title"] for s in listed] == ["second", "first"]
    assert [s["active"] for s in listed] == [True, False]
    assert switched["session_id"] == first["session_id"] and switched["active"] is True
    assert got["session_id"] == first["session_id"] and got["metadata"] == {"k": 1}
    assert [t["status"] for t in got["turns"]] == ["completed"]
    assert [e["message"]["role"] for e in got["history"]] == ["user", "assistant"]
    assert deleted.structured_content == {"session_id": second["session_id"], "deleted": True}
    assert [s["title"] for s in after] == ["first"]


async def test_session_list_and_turns_page_with_cursors(tmp_path: Path, mode: str) -> None:
    script = [{"content": f"answer {i}"} for i in range(3)]
    async with connect(tmp_path, script, mode=mode) as h:
        for i in range(3):
            await h.call("session_create", {"title": f"s{i}"})
        page1 = (await h.call("session_list", {"limit": 2})).structured_content
        page2 = (await h.call("session_list", {"limit": 2, "cursor": page1["next_cursor"]})).structured_content
        for i in range(3):
            await h.call("run_turn", {"prompt": f"q{i}"})
        turns1 = (await h.call("session_get", {"turns_limit": 2})).structured_content
        turns2 = await h.call("session_get", {"turns_limit": 2, "turns_cursor": turns1["next_turns_cursor"]})
    assert [s["title"] for s in page1["sessions"] + page2["sessions"]] == ["s2", "s1", "s0"]
    assert page2["next_cursor"] is None
    finals = [t["final_text"] for t in turns1["turns"] + turns2.structured_content["turns"]]
    assert finals == ["answer 0", "answer 1", "answer 2"]


async def test_fork_copies_history_up_to_a_turn(tmp_path: Path, mode: str) -> None:
    script = [
        {"content": "first answer"},
        {"content": "second answer"},
        {"expect_contains": "first answer", "content": "forked answer"},
    ]
    async with connect(tmp_path, script, mode=mode) as h:
        t1 = (await h.call("run_turn", {"prompt": "one"})).structured_content
        await h.call("run_turn", {"prompt": "two"})
        fork = (await h.call("session_fork", {"at_turn": t1["turn_id"]})).structured_content
        forked = await h.call("session_get", {"session_id": fork["session_id"], "include_history": True})
        run = await h.call("run_turn", {"prompt": "three", "session_id": fork["session_id"]})
    texts = [e["message"]["content"] for e in forked.structured_content["history"]]
    assert texts == ["one", "first answer"]
    assert run.structured_content["status"] == "completed"
    assert "second answer" not in str(h.llm.calls[2].messages)


async def test_compact_dry_run_previews_without_changing_the_session(tmp_path: Path, mode: str) -> None:
    script = [{"content": f"answer {i}"} for i in range(3)] + [{"content": "SUMMARY: preview"}]
    async with connect(tmp_path, script, mode=mode) as h:
        for i in range(3):
            await h.call("run_turn", {"prompt": f"q{i}"})
        preview = await h.call("compact", {"keep_last": 2, "dry_run": True})
        unchanged = (await h.call("session_get", {"include_history": True})).structured_content
    assert preview.structured_content["dry_run"] is True
    assert preview.structured_content["summary"] == "SUMMARY: preview"
    assert preview.content[0].text.startswith("would compact 4 message(s)")
    assert all(not e["archived"] for e in unchanged["history"])
    assert unchanged["compactions"] == [] and unchanged["summary"] is None


async def test_compact_then_turn_uses_summary(tmp_path: Path, mode: str) -> None:
    script = [{"content": f"answer {i}: " + "detail " * 40} for i in range(3)] + [
        {"expect_contains": ["answer 0", "keep the numbers"], "content": "SUMMARY: three answers"},
        {"expect_contains": "SUMMARY: three answers", "content": "uses summary"},
    ]
    async with connect(tmp_path, script, mode=mode) as h:
        for i in range(3):
            await h.call("run_turn", {"prompt": f"q{i}"})
        result = await h.call("compact", {"keep_last": 2, "instructions": "keep the numbers"})
        got = (await h.call("session_get", {"include_history": True})).structured_content
        turn = await h.call("run_turn", {"prompt": "what happened?"})
    record = result.structured_content
    assert record["mode"] == "llm" and record["summary"] == "SUMMARY: three answers"
    assert record["compacted_message_count"] == 4 and record["preserved_message_count"] == 2
    assert record["estimated_tokens_after"] < record["estimated_tokens_before"]
    assert [e["archived"] for e in got["history"]] == [True] * 4 + [False] * 2
    assert got["summary"] == "SUMMARY: three answers"
    assert len(got["compactions"]) == 1
    assert turn.structured_content["status"] == "completed"
    assert any(e["type"] == "compaction" for e in h.events.events)


async def test_compact_falls_back_when_the_model_fails(tmp_path: Path, mode: str) -> None:
    script = [{"content": "answer 0"}, {"content": "answer 1"}, {"error": {"message": "no summaries today"}}]
    async with connect(tmp_path, script, mode=mode) as h:
        await h.call("run_turn", {"prompt": "q0"})
        await h.call("run_turn", {"prompt": "q1"})
        result = await h.call("compact", {"keep_last": 0})
    record = result.structured_content
    assert result.is_error is False
    assert record["mode"] == "fallback" and record["error"] == "no summaries today"
    assert "answer 0" in record["summary"]


async def test_preflight_compaction_runs_under_token_pressure(tmp_path: Path, mode: str) -> None:
    big = "word " * 1500
    script = [
        {"content": big},
        {"content": "SUMMARY of the big answer"},
        {"expect_contains": "SUMMARY of the big answer", "content": "small"},
    ]
    async with connect(tmp_path, script, mode=mode, context_window=2000, compact_keep_last=0) as h:
        await h.call("run_turn", {"prompt": "say a lot"})
        result = await h.call("run_turn", {"prompt": "and now?"})
    record = result.structured_content
    assert record["status"] == "completed", record
    assert record["compaction"]["reason"] == "token-pressure"
    assert record["compaction"]["mode"] == "llm"


async def test_agent_tools_lists_builtin_tools(tmp_path: Path, mode: str) -> None:
    async with connect(tmp_path, mode=mode) as h:
        result = (await h.call("agent_tools")).structured_content
    assert {t["name"] for t in result["tools"]} == set(READ_TOOLS)
    assert {t["source"] for t in result["tools"]} == {"builtin"}
    assert all(t["input_schema"]["type"] == "object" for t in result["tools"])
    assert result["servers"] == []


async def test_session_get_pages_the_history(tmp_path: Path, mode: str) -> None:
    script = [{"content": f"answer {i}"} for i in range(3)]
    async with connect(tmp_path, script, mode=mode) as h:
        for i in range(3):
            await h.call("run_turn", {"prompt": f"question {i}"})
        first = (await h.call("session_get", {"include_history": True, "history_limit": 4})).structured_content
        rest = await h.call("session_get", {"history_cursor": first["next_history_cursor"], "history_limit": 4})
        default = (await h.call("session_get", {"include_history": True})).structured_content
        plain = (await h.call("session_get")).structured_content
    texts = [e["message"]["content"] for e in first["history"] + rest.structured_content["history"]]
    assert texts == [text for i in range(3) for text in (f"question {i}", f"answer {i}")]
    assert [e["seq"] for e in first["history"]] == [1, 2, 3, 4]
    assert rest.structured_content["next_history_cursor"] is None
    assert (len(default["history"]), default["next_history_cursor"]) == (6, None)
    assert (plain["history"], plain["next_history_cursor"]) == (None, None)


async def test_a_session_made_without_a_title_takes_its_first_prompt(tmp_path: Path, mode: str) -> None:
    """Before, such a session stayed "Untitled session" (only a session a turn made got the prompt's title)."""
    long_prompt = "Please look at the failing test in   tests/unit and tell me why it fails " + "x" * 80
    script = [{"content": "one"}, {"content": "two"}, {"content": "three"}]
    async with connect(tmp_path, script, mode=mode) as h:
        untitled = (await h.call("session_create")).structured_content
        named = (await h.call("session_create", {"title": "mine"})).structured_content
        before = (await h.call("session_list")).structured_content["sessions"]
        await h.call("run_turn", {"prompt": long_prompt, "session_id": untitled["session_id"]})
        await h.call("run_turn", {"prompt": "a second prompt", "session_id": untitled["session_id"]})
        await h.call("run_turn", {"prompt": "not the title", "session_id": named["session_id"]})
        after = (await h.call("session_list")).structured_content["sessions"]
    assert [s["title"] for s in before] == ["mine", "Untitled session"]
    title = after[1]["title"]
    assert title.startswith("Please look at the failing test in tests/unit and tell me") and title.endswith("…")
    assert len(title) == 60
    assert after[0]["title"] == "mine"
