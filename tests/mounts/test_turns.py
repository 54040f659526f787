"""The real reference servers mounted by agent-server and called by a scripted turn through run_turn."""

from __future__ import annotations

from pathlib import Path

import mcp_types as types
import pytest
from mcp.client import ClientRequestContext

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
    assert relayed[:5] == ["started", "running", "1/4", "2/4", "3/4"], progress.messages  # running: past its gate
    assert relayed[-1].startswith("ok in ")
    tool_progress = [e["progress"] for e in h.events.events if e["type"] == "tool_progress"]
    assert tool_progress[:3] == [1, 2, 3] and len(tool_progress) <= 4


class CountingUser:
    """Allows every call once, and remembers what it was asked about."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        self.asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "allow_once"})


@pytest.mark.parametrize("trust", [True, False])
async def test_the_filesystem_servers_write_needs_approval_and_its_reads_only_when_untrusted(
    filesystem_server: Path, tmp_path: Path, trust: bool
) -> None:
    """DESIGN 3.7: a mounted tool runs unasked only when it says readOnlyHint and its server is trusted."""
    root = (tmp_path / "shared").resolve()
    root.mkdir()
    servers = {"fs": {"command": "node", "args": [str(filesystem_server), str(root)], "trust": trust}}
    target = str(root / "notes.md")
    script = [
        {"tool_calls": [{"name": "fs__write_file", "arguments": {"path": target, "content": "hello"}}]},
        {"tool_calls": [{"name": "fs__read_text_file", "arguments": {"path": target}}]},
        {"expect_contains": "hello", "content": "written and read"},
    ]
    user = CountingUser()
    settings = make_settings(tmp_path, mcpServers=servers)
    async with connect(tmp_path, script, mode="legacy", settings=settings, timeout=30, elicitation_callback=user) as h:
        result = await h.call("run_turn", {"prompt": "write then read the notes", "detail": "full"})
    record = result.structured_content
    assert record["status"] == "completed", record
    assert (root / "notes.md").read_text() == "hello"
    asked = [a["tool"] for a in record["approvals"]]
    assert asked == (["fs__write_file"] if trust else ["fs__write_file", "fs__read_text_file"])
    assert len(user.asked) == len(asked) and "fs__write_file (from mcp:fs)" in user.asked[0]
