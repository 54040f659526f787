"""Mounted MCP servers as tools of the agent, through run_turn, in both protocol eras."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.fakes import mcp_echo
from tests.interaction.harness import MODES, Progress, connect, make_settings

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("mode", MODES)]

ECHO = str(Path(mcp_echo.__file__).resolve())


def _settings(tmp_path: Path, servers: dict[str, Any], **overrides: Any) -> Any:
    """The fake's tools run without asking (these tests are about mounting; the gate is in test_approvals)."""
    overrides.setdefault("approvals", {"default": "allow"})
    return make_settings(tmp_path, mcpServers=servers, **overrides)


async def test_mounted_tool_result_reaches_the_model(tmp_path: Path, mode: str) -> None:
    settings = _settings(tmp_path, {"fake": {"command": "unused"}})
    script = [
        {"tool_calls": [{"name": "fake__echo", "arguments": {"text": "ping through the mount"}}]},
        {"expect_contains": "ping through the mount", "content": "echoed"},
    ]
    async with connect(
        tmp_path, script, mode=mode, settings=settings, in_process_mounts={"fake": mcp_echo.build()}
    ) as h:
        result = await h.call("run_turn", {"prompt": "echo it"})  # waits for the mount to start
        tools = (await h.call("agent_tools")).structured_content
    assert result.structured_content["status"] == "completed", result.structured_content
    names = {t["name"]: t["source"] for t in tools["tools"]}
    assert names["fake__echo"] == "mcp:fake" and names["read_file"] == "builtin"
    assert tools["servers"] == [
        {
            "name": "fake",
            "transport": "stdio",
            "state": "ready",
            "error": None,
            "tool_count": len([n for n in names if n.startswith("fake__")]),
        }
    ]


async def test_mounted_progress_and_error_results_stay_data(tmp_path: Path, mode: str) -> None:
    settings = _settings(tmp_path, {"fake": {"command": "unused", "include": ["slow", "fail"]}})
    script = [
        {
            "tool_calls": [
                {"name": "fake__slow", "arguments": {"steps": 3, "delay": 0}},
                {"name": "fake__fail", "arguments": {"message": "nope"}},
            ]
        },
        {"expect_contains": ["done 3 steps", "nope"], "content": "ok"},
    ]
    progress = Progress()
    async with connect(
        tmp_path, script, mode=mode, settings=settings, in_process_mounts={"fake": mcp_echo.build()}
    ) as h:
        result = await h.call("run_turn", {"prompt": "go", "detail": "full"}, progress_callback=progress)
    record = result.structured_content
    assert record["status"] == "completed", record
    results = {r["name"]: r for r in record["tool_rounds"][0]["tool_results"]}
    assert results["fake__fail"]["is_error"] is True and results["fake__slow"]["is_error"] is False
    assert any(m.startswith("fake__slow: step") for m in progress.messages)
    assert any(e["type"] == "tool_progress" for e in h.events.events)


@pytest.mark.subprocess  # kills a real server process and waits for its restart
async def test_a_mount_killed_mid_call_gives_an_error_result_and_restarts(tmp_path: Path, mode: str) -> None:
    servers = {"proc": {"command": sys.executable, "args": [ECHO], "timeout_s": 20}}
    script = [
        {"tool_calls": [{"name": "proc__pid", "arguments": {}}]},
        {"content": "got pid"},
        {"tool_calls": [{"name": "proc__crash", "arguments": {}}]},
        {"expect_contains": "proc__crash", "content": "it crashed"},
        {"tool_calls": [{"name": "proc__echo", "arguments": {"text": "back again"}}]},
        {"expect_contains": "back again", "content": "restarted"},
    ]
    async with connect(tmp_path, script, mode=mode, settings=_settings(tmp_path, servers), timeout=40) as h:
        first = await h.call("run_turn", {"prompt": "pid?"})
        crashed = await h.call("run_turn", {"prompt": "crash it", "detail": "full"})
        states = (await h.call("agent_tools")).structured_content["servers"]
        again = await h.call("run_turn", {"prompt": "echo"})
    assert first.structured_content["status"] == "completed"
    crash_record = crashed.structured_content
    assert crash_record["status"] == "completed", crash_record
    assert crash_record["tool_rounds"][0]["tool_results"][0]["is_error"] is True
    assert states[0]["state"] == "failed"
    assert again.structured_content["final_text"] == "restarted"


async def test_a_missing_command_is_failed_and_the_model_is_told(tmp_path: Path, mode: str) -> None:
    servers = {"ghost": {"command": str(tmp_path / "no-such-binary")}, "fake": {"command": "unused"}}
    script = [{"expect_contains": ["ghost", "unavailable"], "content": "noted"}]
    settings = _settings(tmp_path, servers)
    async with connect(
        tmp_path, script, mode=mode, settings=settings, in_process_mounts={"fake": mcp_echo.build()}
    ) as h:
        result = await h.call("run_turn", {"prompt": "hi"})
        servers_state = {s["name"]: s for s in (await h.call("agent_tools")).structured_content["servers"]}
    assert result.structured_content["status"] == "completed", result.structured_content
    assert servers_state["ghost"]["state"] == "failed" and servers_state["ghost"]["error"]
    assert servers_state["fake"]["state"] == "ready"


async def test_agent_tools_answers_while_a_mount_is_still_starting(tmp_path: Path, mode: str) -> None:
    silent = str(Path(mcp_echo.__file__).with_name("mcp_silent.py"))
    servers = {"slow": {"command": sys.executable, "args": [silent, str(tmp_path / "pid")], "startup_timeout_s": 30}}
    async with connect(tmp_path, mode=mode, settings=_settings(tmp_path, servers)) as h:
        with anyio.fail_after(3):
            tools = (await h.call("agent_tools")).structured_content
    assert tools["servers"][0]["state"] == "starting"
