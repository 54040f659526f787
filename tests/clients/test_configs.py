"""The client config snippets in clients/configs/: each parses, and the command line it holds starts the server.

Each snippet is parsed with its host's format (TOML for Codex, JSON for the others: strict JSON is a subset of
the JSONC that VS Code and Zed also accept) and the keys each host needs are checked (see clients/README.md for
why each is there). Only what a user must fill in is substituted: the workspace placeholder (or the editor's
`${workspaceFolder}`) becomes a temporary directory, a `--workspace .` runs the server in that directory (the
host starts it in the project), `${VAR:-default}` becomes its default and other `${...}` references dummy
values, and the command `agent-server` becomes the console script of this environment. The model flags and
env stay as pasted.
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
    "turn_get",
    "turn_wait",
    "turn_cancel",
    "compact",
    "session_create",
    "session_list",
    "session_get",
    "session_switch",
    "session_fork",
    "session_delete",
    "agent_tools",
}


MIN_TOOL_TIMEOUT_S = 300  # a run_turn is a whole agent turn: a host limit below this cuts ordinary turns


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
    assert entry["required"] is True, "codex exec must wait for the server's `initialize`"
    assert entry["default_tools_approval_mode"] == "approve", "codex exec refuses calls that need approval"
    assert entry["startup_timeout_sec"] >= 20, "Codex's 10 s default is tight on a loaded machine"
    assert entry["tool_timeout_sec"] >= MIN_TOOL_TIMEOUT_S
    assert "60 s" not in path.read_text(), "the stale claim about Codex's default tool timeout is back"
    return Entry(entry["command"], entry["args"], entry.get("env", {}), entry.get("env_vars", []))


def claude_code(path: Path) -> Entry:
    entry = json.loads(path.read_text())["mcpServers"]["agent"]
    assert entry["type"] == "stdio"
    assert entry["alwaysLoad"] is True, "without it Claude Code hides the tools behind its tool search"
    assert _milliseconds(entry["timeout"]) >= MIN_TOOL_TIMEOUT_S
    return _json_entry({"agent": entry})


def gemini(path: Path) -> Entry:
    entry = json.loads(path.read_text())["mcpServers"]["agent"]
    assert _milliseconds(entry["timeout"]) >= MIN_TOOL_TIMEOUT_S
    assert isinstance(entry["trust"], bool)
    return _json_entry({"agent": entry})


def zed(path: Path) -> Entry:
    entry = json.loads(path.read_text())["context_servers"]["agent"]
    assert entry["source"] == "custom"
    assert isinstance(entry["timeout"], int) and MIN_TOOL_TIMEOUT_S <= entry["timeout"] <= 600  # seconds; Zed's max
    return Entry(entry["command"], entry["args"], entry.get("env", {}), [])


def _milliseconds(timeout: object) -> float:
    """A host timeout in milliseconds, as seconds; a value under 1000 is someone writing seconds by mistake."""
    assert isinstance(timeout, int) and timeout >= 1000, f"timeout {timeout!r} is in milliseconds"
    return timeout / 1000


SNIPPETS = {
    "claude_desktop_config.json": claude_desktop,
    "claude_code/.mcp.json": claude_code,
    "gemini/settings.json": gemini,
    "vscode/mcp.json": vscode,
    "cursor/mcp.json": cursor,
    "codex/config.toml": codex,
    "zed/settings.json": zed,
}


ACP_SNIPPETS = {"zed.json"}
"""Snippets that start the agent in ACP mode (an editor's external agent): checked by the test below them."""


def test_every_snippet_is_covered() -> None:
    on_disk = {p.relative_to(CONFIGS).as_posix() for p in CONFIGS.rglob("*") if p.is_file()}
    assert on_disk == set(SNIPPETS) | ACP_SNIPPETS


def substitute(value: str, workspace: Path) -> str:
    value = value.replace(WORKSPACE_PLACEHOLDER, str(workspace)).replace("${workspaceFolder}", str(workspace))
    value = re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*:-([^}]*)\}", r"\1", value)
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
    relative = args[args.index("--workspace") + 1] == "."  # the host starts the server in the project directory
    assert relative or args[args.index("--workspace") + 1] == str(workspace)
    env = server_env() | {key: substitute(value, workspace) for key, value in entry.env.items()}
    env |= dict.fromkeys(entry.forwarded, "placeholder")
    cwd = workspace if relative else tmp_path
    params = StdioServerParameters(command=console_script(), args=args, env=env, cwd=str(cwd))
    with anyio.fail_after(20):
        async with Client(params, mode="legacy") as client:
            tools = await client.list_tools()
            state = await client.call_tool("session_list", {})
    assert {tool.name for tool in tools.tools} == EXPECTED_TOOLS
    assert state.is_error is False
    assert (workspace / ".agent_server" / "state.db").exists()  # the state went into the workspace given


def test_the_headless_claude_code_line_allows_tools_the_configured_server_has() -> None:
    servers = json.loads((CONFIGS / "claude_code" / ".mcp.json").read_text())["mcpServers"]
    lists = re.findall(r'--allowedTools "?(mcp__[\w,-]+)', (REPO / "clients" / "README.md").read_text())
    rules = [rule for listed in lists for rule in listed.split(",")]
    assert rules, "clients/README.md shows no `claude -p ... --allowedTools` line"
    assert {"mcp__agent__run_turn", "mcp__agent__turn_wait", "mcp__agent__turn_get"} <= set(rules)
    for rule in rules:
        _, server, *tool = rule.split("__")
        assert server in servers, f"{rule}: no server {server!r} in the .mcp.json"
        assert not tool or tool[0] in EXPECTED_TOOLS, f"{rule}: the server has no tool {tool[0]!r}"


async def test_the_zed_acp_snippet_starts_an_acp_agent(tmp_path: Path) -> None:
    from acp import spawn_agent_process

    from tests.acp.helpers import RecordingClient

    entry = json.loads((CONFIGS / "zed.json").read_text())["agent_servers"]["agent-server"]
    assert (entry["type"], entry["command"]) == ("custom", "agent-server")
    assert entry["args"][:2] == ["--protocol", "acp"] and "OPENAI_API_KEY" in entry["env"]
    project = tmp_path / "project"
    project.mkdir()
    env = server_env() | entry["env"]
    with anyio.fail_after(20):
        async with spawn_agent_process(
            RecordingClient(), console_script(), *entry["args"], env=env, cwd=str(project)
        ) as (conn, _process):
            init = await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            listed = await conn.list_sessions()
    assert init.agent_info is not None and init.agent_info.name == "agent-server"
    assert [s.session_id for s in listed.sessions] == [session.session_id]
    assert (project / ".agent_server" / "state.db").exists()  # Zed starts the agent in the project
