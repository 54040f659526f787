"""The write and exec tools end to end: off by default; when enabled a turn writes, edits and runs once the
user approves each call (handshake-era elicitation), and changes nothing when the user declines or cannot be
asked (the headless default)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_server.settings import ApprovalSettings, ToolsOptions
from agent_server.tools.command import command_spec
from agent_server.tools.writes import SPECS as WRITE_SPECS
from tests.interaction.harness import MODES, connect, make_settings
from tests.interaction.test_approvals import ALLOW_ONCE, User

pytestmark = pytest.mark.anyio

CHANGING_TOOLS = {*WRITE_SPECS, command_spec(1).name}
"""The built-in tools that change things, from their registration."""


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


CHANGE_SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "pkg/notes.txt", "content": "alpha\nbeta\n"}}]},
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
"""Write a file, edit it, run a command that reads it: three calls, each needing approval."""


async def test_a_turn_writes_edits_and_runs_a_command_the_user_approves(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, tools=ToolsOptions(write=True, exec=True))
    user = User({"": ALLOW_ONCE})
    async with connect(tmp_path, CHANGE_SCRIPT, mode="legacy", settings=settings, elicitation_callback=user) as h:
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
    assert [p.message.split("?")[0] for p in user.asked] == [
        f"Allow the agent to run {tool}" for tool in ("write_file", "edit_file", "run_command")
    ]
    assert [(a["tool"], a["decision"]) for a in record["approvals"]] == [
        ("write_file", "allow_once"),
        ("edit_file", "allow_once"),
        ("run_command", "allow_once"),
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_without_a_way_to_ask_nothing_changes_and_the_model_reads_why(tmp_path: Path, mode: str) -> None:
    """No elicitation capability (and none on 2026-07-28): the headless default denies every changing call."""
    script = [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}]},
        {
            "expect_contains": "approvals.headless",
            "tool_calls": [{"name": "run_command", "arguments": {"command": "touch y"}}],
        },
        {"content": "I could not."},
    ]
    settings = make_settings(tmp_path, tools=ToolsOptions(write=True, exec=True))
    async with connect(tmp_path, script, mode=mode, settings=settings) as h:
        with anyio.fail_after(10):
            record = (await h.call("run_turn", {"prompt": "change things", "detail": "full"})).structured_content
    assert record["status"] == "completed" and record["final_text"] == "I could not."
    assert sorted(p.name for p in h.workspace.iterdir()) == []
    assert [(a["tool"], a["decision"]) for a in record["approvals"]] == [
        ("write_file", "no_channel"),
        ("run_command", "no_channel"),
    ]


async def test_a_declined_edit_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "notes.txt").write_text("beta\n")
    script = [
        {
            "tool_calls": [
                {"name": "edit_file", "arguments": {"path": "notes.txt", "old_text": "beta", "new_text": "x"}}
            ]
        },
        {"expect_contains": "declined the approval request", "content": "Left it."},
    ]
    settings = make_settings(tmp_path, tools=ToolsOptions(write=True))
    user = User({"": {"action": "decline"}})
    async with connect(tmp_path, script, mode="legacy", settings=settings, elicitation_callback=user) as h:
        with anyio.fail_after(10):
            record = (await h.call("run_turn", {"prompt": "edit", "detail": "full"})).structured_content
    assert record["status"] == "completed" and record["final_text"] == "Left it."
    assert (h.workspace / "notes.txt").read_text() == "beta\n"


@pytest.mark.parametrize("mode", MODES)
async def test_a_policy_that_allows_runs_them_without_asking(tmp_path: Path, mode: str) -> None:
    allow = ApprovalSettings(tools={"write_file": "allow", "edit_file": "allow", "run_command": "allow"})
    settings = make_settings(tmp_path, tools=ToolsOptions(write=True, exec=True), approvals=allow)
    async with connect(tmp_path, CHANGE_SCRIPT, mode=mode, settings=settings) as h:
        with anyio.fail_after(10):
            record = (await h.call("run_turn", {"prompt": "change things", "detail": "full"})).structured_content
    assert record["status"] == "completed", record
    assert (h.workspace / "pkg" / "notes.txt").read_text() == "alpha\ngamma\n"
    assert record["approvals"] == []  # allowed by the policy outright: nothing asked, nothing recorded


@pytest.mark.parametrize("mode", MODES)
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


@pytest.mark.parametrize("mode", MODES)
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
