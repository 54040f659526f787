"""Bounds (DESIGN 5): what the model or a mounted server sends cannot hold the process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from agent_server.llm.scripted import ScriptedLLM
from agent_server.server.app import create_server
from tests.interaction.harness import MODES, make_settings

pytestmark = pytest.mark.anyio

BACKTRACKING = r"(.*?,){20}X"
"""Exponential backtracking (for `re` and `regex` alike) on any line with many commas and no X."""


@pytest.mark.parametrize("mode", MODES)
async def test_a_backtracking_search_neither_holds_other_connections_nor_outlives_its_limit(
    tmp_path: Path, mode: str
) -> None:
    settings = make_settings(tmp_path, search_timeout_s=3)
    (settings.workspace / "data.csv").write_text(",".join(["field"] * 40) + "\n")
    script = [
        {"tool_calls": [{"name": "search_text", "arguments": {"pattern": BACKTRACKING}}]},
        {"expect_contains": "longer than the 3 s limit", "content": "The pattern was too slow."},
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
