"""The real reference servers mounted by agent-server and called by a scripted turn through run_turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.interaction.harness import Progress, connect, make_settings

pytestmark = pytest.mark.anyio


async def test_a_turn_lists_a_directory_through_the_filesystem_server(filesystem_server: Path, tmp_path: Path) -> None:
    root = (tmp_path / "shared").resolve()
    root.mkdir()
    (root / "quarterly-report.md").write_text("numbers")
    # A trusted server's read-only tool runs without approval (nobody could be asked here).
    servers = {"fs": {"command": "node", "args": [str(filesystem_server), str(root)], "trust": True}}
    script = [
        {"tool_calls": [{"name": "fs__list_directory", "arguments": {"path": str(root)}}]},
        {"expect_contains": "[FILE] quarterly-report.md", "content": "There is a quarterly report."},
    ]
    settings = make_settings(tmp_path, mcpServers=servers)
    async with connect(tmp_path, script, mode="legacy", settings=settings, timeout=30) as h:
        result = await h.call("run_turn", {"prompt": "What is in the shared folder?", "detail": "full"})
    record = result.structured_content
    assert record["status"] == "completed", record
    assert record["tool_rounds"][0]["tool_results"][0]["is_error"] is False


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_long_running_progress_reaches_the_outer_caller(
    everything_server: Path, tmp_path: Path, mode: str
) -> None:
    servers = {"everything": {"command": "node", "args": [str(everything_server), "stdio"]}}
    call = {"name": "everything__trigger-long-running-operation", "arguments": {"duration": 1, "steps": 4}}
    script = [{"tool_calls": [call]}, {"expect_contains": "Long running operation completed", "content": "done"}]
    progress = Progress()
    async with connect(
        tmp_path,
        script,
        mode=mode,
        settings=make_settings(tmp_path, mcpServers=servers, approvals={"default": "allow"}),
        timeout=30,
    ) as h:
        result = await h.call("run_turn", {"prompt": "run the long operation"}, progress_callback=progress)
    assert result.structured_content["status"] == "completed", result.structured_content
    name = "everything__trigger-long-running-operation"
    relayed = [m.removeprefix(f"{name}: ") for m in progress.messages if m.startswith(f"{name}: ")]
    # The server's last progress may race its own result (the SDK delivers them on separate paths).
    assert relayed[:4] == ["started", "1/4", "2/4", "3/4"], progress.messages
    assert relayed[-1].startswith("ok in ")
    tool_progress = [e["progress"] for e in h.events.events if e["type"] == "tool_progress"]
    assert tool_progress[:3] == [1, 2, 3] and len(tool_progress) <= 4
