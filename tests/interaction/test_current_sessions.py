"""Each connection's current session (DESIGN 3.5): in memory, created once, `new` for a fresh one."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.interaction.harness import MODES, connect

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("mode", MODES)]


async def test_eight_concurrent_first_turns_share_one_new_session(tmp_path: Path, mode: str) -> None:
    script = [{"delay_s": 0.05, "content": f"answer {i}"} for i in range(8)]
    results: list[dict[str, object]] = []
    async with connect(tmp_path, script, mode=mode) as h:

        async def turn(i: int) -> None:
            result = await h.call("run_turn", {"prompt": f"question {i}"})
            assert result.structured_content is not None
            results.append(result.structured_content)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for i in range(8):
                    tg.start_soon(turn, i)
            sessions = (await h.call("session_list")).structured_content["sessions"]
    assert {r["status"] for r in results} == {"completed"}
    assert len({r["session_id"] for r in results}) == 1
    assert [(s["turn_count"], s["active"]) for s in sessions] == [(8, True)]


async def test_new_starts_a_fresh_session_and_keeps_the_current_one(tmp_path: Path, mode: str) -> None:
    script = [
        {"content": "first-answer"},
        {"content": "fresh"},
        {"expect_contains": "first-answer", "content": "continued"},
        {"expect_contains": "fresh", "content": "continued fresh"},
    ]
    async with connect(tmp_path, script, mode=mode) as h:
        with anyio.fail_after(10):
            first = (await h.call("run_turn", {"prompt": "start"})).structured_content
            fresh = (await h.call("run_turn", {"prompt": "other", "session_id": "new"})).structured_content
            again = (await h.call("run_turn", {"prompt": "go on"})).structured_content
            resumed = await h.call("run_turn", {"prompt": "go on", "session_id": fresh["session_id"]})
            listed = (await h.call("session_list")).structured_content["sessions"]
    assert fresh["session_id"] != first["session_id"]
    assert again["session_id"] == first["session_id"] and again["final_text"] == "continued"
    assert resumed.structured_content["final_text"] == "continued fresh"
    assert {s["session_id"]: s["active"] for s in listed} == {first["session_id"]: True, fresh["session_id"]: False}
    assert "first-answer" not in str(h.llm.calls[1].messages)


async def test_create_and_switch_move_the_current_session_and_delete_clears_it(tmp_path: Path, mode: str) -> None:
    script = [{"content": "in a"}, {"content": "in b"}, {"content": "in a new one"}]
    async with connect(tmp_path, script, mode=mode) as h:
        with anyio.fail_after(10):
            a = (await h.call("session_create", {"title": "a"})).structured_content
            b = (await h.call("session_create", {"title": "b"})).structured_content
            await h.call("session_switch", {"session_id": a["session_id"]})
            in_a = (await h.call("run_turn", {"prompt": "x"})).structured_content
            await h.call("session_switch", {"session_id": b["session_id"]})
            in_b = (await h.call("run_turn", {"prompt": "y"})).structured_content
            await h.call("session_delete", {"session_id": b["session_id"]})
            no_current = await h.call("session_get")
            fresh = (await h.call("run_turn", {"prompt": "z"})).structured_content
    assert (in_a["session_id"], in_b["session_id"]) == (a["session_id"], b["session_id"])
    assert no_current.is_error and "no current session" in no_current.content[0].text
    assert fresh["session_id"] not in {a["session_id"], b["session_id"]}
