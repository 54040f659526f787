"""The write and exec tools end to end: off by default, and when enabled a turn writes, edits and runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_server.settings import ToolsOptions
from tests.interaction.harness import MODES, connect, make_settings

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("mode", MODES)]

CHANGING_TOOLS = {"write_file", "edit_file", "run_command"}


def _tool_messages(history: list[dict[str, Any]]) -> dict[str, str]:
    """The stored tool messages by tool name, as text."""
    found: dict[str, str] = {}
    for entry in history:
        message = entry["message"]
        if message["role"] == "tool":
            content = message["content"]
            text = content if isinstance(content, str) else "\n".join(p.get("text", "") for p in content)
            found[message["name"]] = text
    return found


async def test_a_turn_writes_edits_and_runs_a_command_in_the_workspace(tmp_path: Path, mode: str) -> None:
    script = [
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "pkg/notes.txt", "content": "alpha\nbeta\n"}},
            ]
        },
        {
            "tool_calls": [
                {"name": "edit_file", "arguments": {"path": "pkg/notes.txt", "old_text": "beta", "new_text": "gamma"}}
            ]
        },
        {
            "expect_contains": "+gamma",
            "tool_calls": [
                {"name": "run_command", "arguments": {"command": "cat notes.txt; echo done-$((6*7))", "cwd": "pkg"}}
            ],
        },
        {"expect_contains": ["done-42", "exit code 0"], "content": "All done."},
    ]
    settings = make_settings(tmp_path, tools=ToolsOptions(write=True, exec=True))
    async with connect(tmp_path, script, mode=mode, settings=settings) as h:
        with anyio.fail_after(10):
            result = await h.call("run_turn", {"prompt": "change things", "detail": "full"})
            history = (await h.call("session_get", {"include_history": True})).structured_content["history"]
    record = result.structured_content
    assert record["status"] == "completed", record
    assert record["final_text"] == "All done."
    assert (h.workspace / "pkg" / "notes.txt").read_text() == "alpha\ngamma\n"
    assert [line["is_error"] for line in record["tool_calls"]] == [False, False, False]
    tools = _tool_messages(history)
    assert tools["write_file"] == "Created pkg/notes.txt (11 bytes)"
    assert "-beta\n+gamma" in tools["edit_file"]
    assert tools["run_command"].startswith("exit code 0")
    assert "alpha\ngamma\ndone-42" in tools["run_command"]


async def test_the_changing_tools_are_absent_unless_enabled(tmp_path: Path, mode: str) -> None:
    script = [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}]},
        {"tool_calls": [{"name": "run_command", "arguments": {"command": "touch y.txt"}}]},
        {"content": "could not"},
    ]
    async with connect(tmp_path, script, mode=mode) as h:
        with anyio.fail_after(10):
            listed = (await h.call("agent_tools")).structured_content
            result = await h.call("run_turn", {"prompt": "x"})
    assert not CHANGING_TOOLS & {t["name"] for t in listed["tools"]}
    assert not CHANGING_TOOLS & {t.name for t in h.llm.calls[0].tools}
    record = result.structured_content
    assert [(line["name"], line["is_error"]) for line in record["tool_calls"]] == [
        ("write_file", True),
        ("run_command", True),
    ]
    assert all("unknown tool" in line["error"] for line in record["tool_calls"])
    assert sorted(p.name for p in h.workspace.iterdir()) == []


async def test_enabled_tools_are_listed_with_annotations_that_say_they_change_things(tmp_path: Path, mode: str) -> None:
    settings = make_settings(tmp_path, tools=ToolsOptions(write=True, exec=True))
    async with connect(tmp_path, mode=mode, settings=settings) as h:
        listed = (await h.call("agent_tools")).structured_content
    tools = {t["name"]: t for t in listed["tools"]}
    assert set(tools) >= CHANGING_TOOLS
    for name in CHANGING_TOOLS:
        assert tools[name]["annotations"]["read_only"] is False, name
        assert tools[name]["annotations"]["destructive"] is True, name
    assert tools["run_command"]["annotations"]["open_world"] is True
    assert (tools["write_file"]["annotations"]["idempotent"], tools["edit_file"]["annotations"]["idempotent"]) == (
        True,
        False,
    )
