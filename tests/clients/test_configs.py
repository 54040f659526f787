"""The client config snippets in clients/configs/: each parses, and the command line it holds starts the server.

Only what a user must fill in is substituted: the workspace placeholder (or the editor's `${workspaceFolder}`)
becomes a temporary directory, the editor's other `${...}` references become dummy values, and the command
`agent-server` becomes the console script of this environment. The model flags and env stay as pasted.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.subprocess.helpers import REPO, server_env

pytestmark = pytest.mark.anyio

CONFIGS = REPO / "clients" / "configs"
WORKSPACE_PLACEHOLDER = "/absolute/path/to/your/project"
EXPECTED_TOOLS = {
    "run_turn",
    "compact",
    "session_create",
    "session_list",
    "session_get",
    "session_switch",
    "session_fork",
    "session_delete",
    "agent_tools",
}


@dataclass
class Entry:
    command: str
    args: list[str]
    env: dict[str, str]
    forwarded: list[str]  # env var names the client forwards from its own environment (Codex `env_vars`)


def _json_entry(servers: dict[str, Any]) -> Entry:
    entry = servers["agent"]
    return Entry(entry["command"], entry["args"], entry.get("env", {}), [])


def claude_desktop(path: Path) -> Entry:
    return _json_entry(json.loads(path.read_text())["mcpServers"])


def vscode(path: Path) -> Entry:
    config = json.loads(path.read_text())
    assert config["servers"]["agent"]["type"] == "stdio"
    inputs = {item["id"] for item in config.get("inputs", [])}
    for reference in re.findall(r"\$\{input:([^}]+)\}", path.read_text()):
        assert reference in inputs, f"${{input:{reference}}} has no entry in `inputs`"
    return _json_entry(config["servers"])


def cursor(path: Path) -> Entry:
    return _json_entry(json.loads(path.read_text())["mcpServers"])


def codex(path: Path) -> Entry:
    entry = tomllib.loads(path.read_text())["mcp_servers"]["agent"]
    assert entry["tool_timeout_sec"] >= 300, "run_turn outlives Codex's default 60 s tool timeout"
    return Entry(entry["command"], entry["args"], entry.get("env", {}), entry.get("env_vars", []))


def zed(path: Path) -> Entry:
    entry = json.loads(path.read_text())["context_servers"]["agent"]
    assert entry["source"] == "custom"
    return Entry(entry["command"], entry["args"], entry.get("env", {}), [])


SNIPPETS = {
    "claude_desktop_config.json": claude_desktop,
    "vscode/mcp.json": vscode,
    "cursor/mcp.json": cursor,
    "codex/config.toml": codex,
    "zed/settings.json": zed,
}


def test_every_snippet_is_covered() -> None:
    on_disk = {p.relative_to(CONFIGS).as_posix() for p in CONFIGS.rglob("*") if p.is_file()}
    assert on_disk == set(SNIPPETS)


def substitute(value: str, workspace: Path) -> str:
    value = value.replace(WORKSPACE_PLACEHOLDER, str(workspace)).replace("${workspaceFolder}", str(workspace))
    return re.sub(r"\$\{[^}]+\}", "placeholder", value)


def console_script() -> str:
    script = Path(sys.executable).with_name("agent-server")
    assert script.exists(), f"{script} missing: install the project (pip install -e .)"
    return str(script)


@pytest.mark.parametrize("name", sorted(SNIPPETS))
async def test_snippet_starts_the_server_and_lists_its_tools(name: str, tmp_path: Path) -> None:
    entry = SNIPPETS[name](CONFIGS / name)
    assert entry.command == "agent-server"
    assert entry.args[entry.args.index("--llm") + 1].startswith("openai:")
    assert "--workspace" in entry.args
    assert "OPENAI_API_KEY" in {*entry.env, *entry.forwarded}, "a model needs its key"

    workspace = tmp_path / "project"
    workspace.mkdir()
    args = [substitute(arg, workspace) for arg in entry.args]
    assert args[args.index("--workspace") + 1] == str(workspace)
    env = server_env() | {key: substitute(value, workspace) for key, value in entry.env.items()}
    env |= dict.fromkeys(entry.forwarded, "placeholder")
    params = StdioServerParameters(command=console_script(), args=args, env=env, cwd=str(tmp_path))
    with anyio.fail_after(20):
        async with Client(params, mode="legacy") as client:
            tools = await client.list_tools()
            state = await client.call_tool("session_list", {})
    assert {tool.name for tool in tools.tools} == EXPECTED_TOOLS
    assert state.is_error is False
    assert (workspace / ".agent_server" / "state.db").exists()  # the state went into the workspace given
