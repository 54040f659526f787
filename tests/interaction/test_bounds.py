"""Bounds (DESIGN 5): what the model or a mounted server sends cannot hold the process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from agent_server.llm.scripted import ScriptedLLM
from agent_server.server.app import create_server
from tests.fakes import mcp_listed
from tests.fakes.mcp_listed import tool
from tests.interaction.harness import MODES, connect, make_settings

pytestmark = pytest.mark.anyio

BACKTRACKING = r"(.*?,){20}X"
"""Exponential backtracking (for `re` and `regex` alike) on any line with many commas and no X."""


@pytest.mark.parametrize("mode", MODES)
async def test_a_backtracking_search_neither_holds_other_connections_nor_outlives_its_limit(
    tmp_path: Path, mode: str
) -> None:
    settings = make_settings(tmp_path, search_timeout_s=1)
    (settings.workspace / "data.csv").write_text(",".join(["field"] * 40) + "\n")
    script = [
        {"tool_calls": [{"name": "search_text", "arguments": {"pattern": BACKTRACKING}}]},
        {"expect_contains": "longer than the 1 s limit", "content": "The pattern was too slow."},
    ]
    server = create_server(settings, llm=ScriptedLLM(script))
    searching = anyio.Event()
    turn: dict[str, Any] = {}
    listed_while_searching: list[bool] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if message == "search_text: started":
            searching.set()

    async def run_turn(client: Client) -> None:
        result = await client.call_tool("run_turn", {"prompt": "search"}, progress_callback=on_progress)
        turn.update(result.structured_content or {})

    with anyio.fail_after(30):
        async with (
            Client(server, mode=mode) as first,
            Client(server, mode=mode) as second,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(run_turn, first)
            await searching.wait()
            listed = await second.call_tool("session_list", {})
            listed_while_searching.append(not turn)
    assert listed.is_error is False, listed.content
    assert listed_while_searching == [True]  # answered while the turn's search still ran
    assert turn["status"] == "completed", turn
    assert turn["final_text"] == "The pattern was too slow."  # the model saw the error naming the limit


@pytest.mark.parametrize("mode", MODES)
async def test_clashing_and_invalid_mounted_tools_are_dropped_and_every_turn_still_runs(
    tmp_path: Path, mode: str
) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "notes.txt").write_text("the code is 4711\n")
    servers = {"h": {"command": "unused"}, "h2": {"command": "unused", "prefix": "h__x"}}
    mounts = {
        "h": mcp_listed.build([tool("a.b"), tool("a_b"), tool("x__y"), tool("bad", {"type": "object", "required": 1})]),
        "h2": mcp_listed.build([tool("y"), tool("z")]),
    }
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"expect_contains": "4711", "content": "The code is 4711."},
        {"tool_calls": [{"name": "h__x__z", "arguments": {}}]},
        {"expect_contains": "z", "content": "z answered."},
    ]
    settings = make_settings(tmp_path, mcpServers=servers)
    async with connect(tmp_path, script, mode=mode, settings=settings, in_process_mounts=mounts) as h:
        only_read = await h.call("run_turn", {"prompt": "read", "tools": ["read_file"]})
        mounted = await h.call("run_turn", {"prompt": "mounted"})
        listed = await h.call("agent_tools")
    assert only_read.structured_content["status"] == "completed", only_read.structured_content
    assert mounted.structured_content["status"] == "completed", mounted.structured_content
    assert listed.is_error is False
    tools = listed.structured_content
    names = sorted(t["name"] for t in tools["tools"] if t["source"].startswith("mcp:"))
    assert names == ["h__a_b", "h__x__y", "h__x__z"]
    dropped = {(d["name"], d["source"]): d["reason"] for d in tools["dropped"]}
    assert dropped.keys() == {("h__a_b", "mcp:h"), ("h__bad", "mcp:h"), ("h__x__y", "mcp:h2")}
    assert "already taken by 'mcp:h' (its tool 'a.b')" in dropped["h__a_b", "mcp:h"]
    assert "not valid JSON Schema" in dropped["h__bad", "mcp:h"]
    assert "dropped h__x__y (mcp:h2)" in listed.content[0].text
    assert [s["tool_count"] for s in tools["servers"]] == [2, 1]
