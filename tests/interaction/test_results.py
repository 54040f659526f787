"""What a run_turn result carries (DESIGN 3.4.1): a summary whose size does not grow with the tools' results."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from tests.interaction.harness import MODES, connect

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("mode", MODES)]

SUMMARY_LIMIT = 4096
"""Bytes a default result may take beside its final_text."""


def _size_without_final_text(structured: dict[str, object]) -> int:
    return len(json.dumps({**structured, "final_text": ""}).encode())


async def test_a_turn_that_reads_200_kb_returns_a_small_summary_and_the_full_record_on_request(
    tmp_path: Path, mode: str
) -> None:
    read = {"tool_calls": [{"name": "read_file", "arguments": {"path": "big.txt"}}]}
    script = [read, {"content": "It is big."}, read, {"content": "Still big."}]
    async with connect(tmp_path, script, mode=mode) as h:
        (h.workspace / "big.txt").write_text("all work and no play\n" * 10_000)  # 210 KB
        with anyio.fail_after(10):
            summary = await h.call("run_turn", {"prompt": "read big.txt"})
            full = await h.call("run_turn", {"prompt": "again", "detail": "full"})
    record = summary.structured_content
    assert record["status"] == "completed" and record["final_text"] == "It is big."
    assert _size_without_final_text(record) < SUMMARY_LIMIT
    assert [{k: v for k, v in call.items() if k != "duration_s"} for call in record["tool_calls"]] == [
        {"round": 1, "name": "read_file", "is_error": False}
    ]
    assert not {"assistant_turns", "tool_rounds", "transitions", "prompt"} & record.keys()
    assert summary.content[0].text == "It is big."
    (tool_round,) = full.structured_content["tool_rounds"]
    assert "all work and no play" in tool_round["tool_results"][0]["content"][0]["text"]
    assert full.structured_content["prompt"] == "again"
    assert len(json.dumps(full.structured_content)) > 100_000  # the result as the model saw it (window-capped)


async def test_a_failed_inner_call_is_one_line_in_the_summary(tmp_path: Path, mode: str) -> None:
    script = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "missing.txt"}}]}, {"content": "No file."}]
    async with connect(tmp_path, script, mode=mode) as h:
        with anyio.fail_after(10):
            result = await h.call("run_turn", {"prompt": "read it"})
    (line,) = result.structured_content["tool_calls"]
    assert (line["name"], line["is_error"]) == ("read_file", True)
    assert "file not found" in line["error"] and "\n" not in line["error"]


async def test_session_get_gives_turn_summaries_unless_detail_is_full(tmp_path: Path, mode: str) -> None:
    script = [{"tool_calls": [{"name": "list_dir", "arguments": {}}]}, {"content": "listed"}]
    async with connect(tmp_path, script, mode=mode) as h:
        with anyio.fail_after(10):
            turn = (await h.call("run_turn", {"prompt": "list"})).structured_content
            summary = (await h.call("session_get", {"session_id": turn["session_id"]})).structured_content
            full = await h.call("session_get", {"session_id": turn["session_id"], "detail": "full"})
    assert summary["turns"] == [turn]
    (full_turn,) = full.structured_content["turns"]
    assert full_turn["tool_rounds"][0]["requested_tools"][0]["name"] == "list_dir"
