"""A 20 MB mounted result stays out of the prompt, the history and the store (`mount_result_max_bytes`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp.server.mcpserver import MCPServer

from tests.fakes.openai_server import Reply, completion
from tests.interaction.harness import MODES
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
    servers = {"mcpServers": {"big": {"command": "unused"}}}
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
