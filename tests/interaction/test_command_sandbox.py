"""run_command's sandbox through the MCP surface: `agent_tools` says which mode is active and why, and under
bwrap a command sees neither the server's config files nor its state dir (the runtime hides what it was
configured with)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from agent_server.llm.scripted import ScriptedLLM
from agent_server.server.app import create_server
from agent_server.settings import ToolsOptions, load_settings
from tests.interaction.harness import MODES, connect
from tests.sandboxing import require_sandbox

pytestmark = pytest.mark.anyio


async def agent_tools(tmp_path: Path, mode: str, **overrides: Any) -> tuple[dict[str, Any], str]:
    async with connect(tmp_path, mode=mode, **overrides) as h:
        result = await h.call("agent_tools", {})
    assert result.structured_content is not None
    return result.structured_content, result.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", MODES)
async def test_agent_tools_says_where_commands_run(tmp_path: Path, mode: str) -> None:
    report, text = await agent_tools(tmp_path, mode, tools=ToolsOptions(exec=True, sandbox="none"))
    assert report["sandbox"] == {"mode": "none", "reason": 'tools.sandbox is "none"', "network": True}
    assert 'run_command sandbox: none (tools.sandbox is "none")' in text.splitlines()


@pytest.mark.parametrize("mode", MODES)
async def test_agent_tools_reports_no_sandbox_when_run_command_is_off(tmp_path: Path, mode: str) -> None:
    report, text = await agent_tools(tmp_path, mode)
    assert report.get("sandbox") is None and "sandbox" not in text


async def test_agent_tools_says_commands_are_refused_when_required_bwrap_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "empty-bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # where the runtime looks for bwrap
    report, _ = await agent_tools(tmp_path, "auto", tools=ToolsOptions(exec=True, sandbox="bwrap"))
    assert report["sandbox"] == {
        "mode": "refused",
        "reason": 'tools.sandbox is "bwrap", but bwrap not found on PATH (install bubblewrap)',
        "network": False,
    }


async def test_under_bwrap_a_command_sees_neither_the_config_files_nor_the_state_dir(tmp_path: Path) -> None:
    require_sandbox("bwrap")
    workspace, state = tmp_path / "ws", tmp_path / "ws" / ".agent_server"
    workspace.mkdir()
    mcp_config = workspace / ".mcp.json"
    mcp_config.write_text(json.dumps({"mcpServers": {}, "note": "mcp-secret-4711"}))
    config = workspace / "agent-server.json"  # in the workspace: elsewhere under /tmp the private /tmp hides it
    settings_file = {
        "workspace": str(workspace),
        "system_prompt": "config-secret-4242",
        "mcp_config": str(mcp_config),
        "tools": {"exec": True, "sandbox": "bwrap"},
        "approvals": {"default": "allow"},
    }
    config.write_text(json.dumps(settings_file))
    settings = load_settings(config_file=config)
    command = f"cat {config} {mcp_config}; ls -A {state}; echo listed"
    llm = ScriptedLLM(
        [
            {"tool_calls": [{"name": "run_command", "arguments": {"command": command}}]},
            {"expect_contains": "listed", "content": "done"},
        ]
    )
    with anyio.fail_after(20):
        async with Client(create_server(settings, llm=llm)) as client:
            turn = await client.call_tool("run_turn", {"prompt": "look around", "detail": "full"})
            session = await client.call_tool("session_get", {"include_history": True})
    assert turn.structured_content is not None and turn.structured_content["status"] == "completed"
    assert session.structured_content is not None
    (seen,) = [
        entry["message"]["content"]
        for entry in session.structured_content["history"]
        if entry["message"]["role"] == "tool"
    ]
    assert "listed" in seen and "Permission denied" in seen, seen
    assert "config-secret-4242" not in seen and "mcp-secret-4711" not in seen and "state.db" not in seen
    assert (state / "state.db").is_file()  # the store is there, only hidden from the command
