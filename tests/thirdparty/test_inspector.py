"""The MCP Inspector CLI (`@modelcontextprotocol/inspector --cli`) drives agent-server over stdio.

The Inspector offers the protocol eras through `--protocol-era legacy|modern|auto`: `legacy` is the
`initialize` handshake (2025-11-25), `modern` is 2026-07-28 (`server/discover`, per-request `_meta`),
`auto` probes and lands on modern against this server. Each call spawns a fresh server on one state dir,
so what one call stores the next one sees.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import anyio
import pytest

from tests.thirdparty.conftest import Layout, NodeTools

pytestmark = pytest.mark.anyio

SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "hello.txt"}}]},
    {"expect_contains": "hello world", "content": "The file says hello world."},
]
ERAS = ["legacy", "modern", "auto"]
SERVER_INFO_STAMP = "io.modelcontextprotocol/serverInfo"  # stamped on results in the modern era only


async def inspector(
    tools: NodeTools, layout: Layout, era: str, method: str, tool: str | None = None, **arguments: str
) -> dict[str, Any]:
    command = tools.command("@modelcontextprotocol/inspector", "inspector")
    command += ["--cli", "--protocol-era", era, "--format", "json", "--method", method]
    if tool:
        command += ["--tool-name", tool]
    for key, value in arguments.items():
        command += ["--tool-arg", f"{key}={value}"]
    command += ["--", *layout.server_argv(SCRIPT)]
    with anyio.fail_after(30):
        done = await anyio.run_process(command, env=tools.env(), cwd=layout.root, check=False, stderr=subprocess.PIPE)
    output = done.stdout.decode()
    assert done.returncode == 0, f"{' '.join(command)}\nstdout: {output}\nstderr: {done.stderr.decode()}"
    return json.loads(output)["result"]


@pytest.mark.parametrize("era", ERAS)
async def test_inspector_lists_tools_and_calls_them(
    node_tools: NodeTools, layout: Layout, era: str, capsys: pytest.CaptureFixture[str]
) -> None:
    listing = await inspector(node_tools, layout, era, "tools/list")
    names = [tool["name"] for tool in listing["tools"]]
    assert len(names) == 12 and "run_turn" in names
    run_turn = next(tool for tool in listing["tools"] if tool["name"] == "run_turn")
    assert run_turn["outputSchema"]["title"] == "TurnResult"

    created = await inspector(node_tools, layout, era, "tools/call", "session_create", title=f"inspector {era}")
    session = created["structuredContent"]
    assert created["isError"] is False and session["title"] == f"inspector {era}"

    listed = await inspector(node_tools, layout, era, "tools/call", "session_list")
    assert [s["session_id"] for s in listed["structuredContent"]["sessions"]] == [session["session_id"]]

    # Each Inspector call is a new server process, which has no current session: name the session.
    question = {"prompt": "What does hello.txt say?", "session_id": session["session_id"]}
    turn = await inspector(node_tools, layout, era, "tools/call", "run_turn", **question)
    record = turn["structuredContent"]
    assert turn["isError"] is False, record
    assert record["status"] == "completed" and record["session_id"] == session["session_id"]
    assert record["final_text"] == "The file says hello world."
    assert turn["content"] == [{"type": "text", "text": "The file says hello world."}]
    assert [call["name"] for call in record["tool_calls"]] == ["read_file"]

    # Which era the connection used: only modern-era results carry the server-info stamp.
    modern = [SERVER_INFO_STAMP in (result.get("_meta") or {}) for result in (created, listed)]
    assert modern == [era != "legacy"] * 2
    # The modern Inspector declares the MCP tasks extension (SEP-2663): run_turn came back as a task, which it
    # polled with tasks/get to this result (the task's CallToolResult, which no response envelope stamped).
    assert (SERVER_INFO_STAMP in (turn.get("_meta") or {})) is False
    with capsys.disabled():
        print(
            f"\n[inspector --protocol-era {era}] tools/list: {len(names)} tools; session_create: "
            f"{session['session_id']}; session_list: 1 session; run_turn: {record['status']} "
            f"({record['final_text']!r}); era: {'2026-07-28' if modern[0] else 'handshake 2025-11-25'}"
        )
