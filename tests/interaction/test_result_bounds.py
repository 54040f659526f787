"""A 20 MB mounted result stays out of the prompt, the history and the store (`mount_result_max_bytes`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

from tests.fakes.openai_server import Reply, completion
from tests.interaction.harness import MODES, connect
from tests.interaction.openai_harness import local

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("mode", MODES)]

SIZE = 20_000_000


def flood_server() -> MCPServer:
    server = MCPServer("big", version="1.0.0", log_level="WARNING")

    @server.tool(description="A lot of text")
    async def flood(size: int) -> str:
        return "y" * size

    return server


async def test_a_20_mb_mounted_result_is_capped_in_the_prompt_the_record_and_the_store(
    tmp_path: Path, mode: str
) -> None:
    call = completion(None, tool_calls=[("c1", "big__flood", json.dumps({"size": SIZE}))])
    mounts = {"big": flood_server()}
    servers = {"mcpServers": {"big": {"command": "unused"}}, "approvals": {"default": "allow"}}
    async with local(tmp_path, mode, openai={"stream": False}, in_process_mounts=mounts, **servers) as h:
        h.model.add(Reply(json=call), Reply(json=completion("that was a lot")))
        record, _ = await h.turn("flood me")
        h.model.add(Reply(json=completion("next")))
        await h.turn("and now?")
    assert record["status"] == "completed", record
    text = h.model.requests[1].json["messages"][-1]["content"]
    assert "mount_result_max_bytes" in text
    # The mount cap (256 KiB) and then the window's share (128,000 chars at the defaults) bound it.
    assert len(text) < 130_000
    assert all(len(r.body) < 300_000 for r in h.model.requests)  # the next turn's prompt too
    state_db = sum(p.stat().st_size for p in (tmp_path / "state").glob("state.db*"))
    assert state_db < 3_000_000


async def test_compact_folds_big_recent_tool_results_instead_of_keeping_them_whole(tmp_path: Path, mode: str) -> None:
    window = 4000  # the kept messages may take 4000 * 0.8 / 2 = 1600 estimated tokens
    script: list[dict[str, Any]] = []
    for name in ("a", "b"):
        script += [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": f"{name}.txt"}}]},
            {"content": f"read {name}"},
        ]
    script.append({"content": "SUMMARY: two files read"})
    async with connect(tmp_path, script, mode=mode, context_window=window) as h:
        for name in ("a", "b"):
            (h.workspace / f"{name}.txt").write_text(name * 3900)  # about 1000 tokens each
        for name in ("a", "b"):
            await h.call("run_turn", {"prompt": f"read {name}.txt"})
        record = (await h.call("compact", {"keep_last": 8})).structured_content
    # All 8 messages fit keep_last, but not the budget: the older read (prompt, call, result) is summarised.
    assert record["compacted_message_count"] == 3 and record["preserved_message_count"] == 5
    assert record["estimated_tokens_after"] <= 1600
