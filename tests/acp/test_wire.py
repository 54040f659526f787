"""The ACP mode's wire seen raw: stdout carries only JSON-RPC 2.0, logs go to stderr; and one store behind
both protocols (a session made over MCP is continued over ACP and read back over MCP)."""

from __future__ import annotations

import json
import signal
import subprocess
from typing import Any

import acp
import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client

from tests.acp.helpers import READ_ROUND, WAIT_S, acp_argv, make_workspace, spawned
from tests.subprocess.helpers import ServerDirs, server_env, statuses, structured

pytestmark = pytest.mark.anyio

LINE_MAX = 1 << 20


def is_jsonrpc(message: Any) -> bool:
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return False
    if "method" in message:
        return isinstance(message["method"], str)
    return "id" in message and (("result" in message) != ("error" in message))


async def test_stdout_carries_only_acp_json_rpc(dirs: ServerDirs) -> None:
    project = make_workspace(dirs.root / "project")
    argv = [*acp_argv(dirs, READ_ROUND), "--log-level", "DEBUG"]
    requests = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(project), "mcpServers": []}},
    ]
    lines: list[bytes] = []
    with anyio.fail_after(WAIT_S):
        async with await anyio.open_process(
            argv, env=server_env(), cwd=str(dirs.root), stderr=subprocess.PIPE
        ) as process:
            assert process.stdin and process.stdout and process.stderr
            stdout = BufferedByteReceiveStream(process.stdout)

            async def until_response(request_id: int) -> dict[str, Any]:
                while True:
                    line = await stdout.receive_until(b"\n", LINE_MAX)
                    lines.append(line)
                    message = json.loads(line)
                    if message.get("id") == request_id and "method" not in message:
                        return message

            async def call(request: dict[str, Any]) -> dict[str, Any]:
                await process.stdin.send(json.dumps(request).encode() + b"\n")
                return await until_response(request["id"])

            assert (await call(requests[0]))["result"]["protocolVersion"] == 1
            session = (await call(requests[1]))["result"]["sessionId"]
            prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "What is the secret word?"}]}
            answer = await call({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt})
            assert answer["result"]["stopReason"] == "end_turn"
            unknown = await call({"jsonrpc": "2.0", "id": 3, "method": "session/set_model", "params": {}})
            assert unknown["error"]["code"] == -32601
            await process.stdin.aclose()
            rest = b""
            async for chunk in process.stdout:
                rest += chunk
            stderr = b""
            async for chunk in process.stderr:
                stderr += chunk
            assert await process.wait() == 0

    lines += [line for line in rest.split(b"\n") if line]
    parsed = [json.loads(line) for line in lines]
    assert all(is_jsonrpc(message) for message in parsed), lines
    updates = [m["params"]["update"]["sessionUpdate"] for m in parsed if m.get("method") == "session/update"]
    assert "tool_call" in updates and "usage_update" in updates
    assert b" DEBUG " in stderr and b"DEBUG" not in b"".join(lines)


async def test_a_session_made_over_mcp_is_continued_over_acp_and_read_back_over_mcp(dirs: ServerDirs) -> None:
    first = [{"content": "Noted: the word is kiwi."}]
    async with Client(dirs.params(first, script="first.json"), mode="auto") as client:
        turn = await structured(client, "run_turn", {"prompt": "Remember the word kiwi", "session_id": "new"})
    session = turn["session_id"]

    later = [{"expect_contains": ["Remember the word kiwi", "Noted: the word is kiwi."], "content": "It was kiwi."}]
    async with spawned(dirs, later) as (conn, _client):
        listed = {s.session_id: s.cwd for s in (await conn.list_sessions()).sessions}
        assert listed == {session: str(dirs.workspace.resolve())}  # an MCP session: the configured workspace
        await conn.resume_session(cwd=str(dirs.workspace), session_id=session, mcp_servers=[])
        response = await conn.prompt(session_id=session, prompt=[acp.text_block("Which word?")])
        assert response.stop_reason == "end_turn"
        await conn.prompt(session_id=session, prompt=[acp.text_block("/sessions")])

    async with Client(dirs.params([], script="last.json"), mode="auto") as client:
        stored = await structured(client, "session_get", {"session_id": session})
    assert statuses(stored) == ["completed", "completed", "completed"]
    assert [t["final_text"] for t in stored["turns"]][:2] == ["Noted: the word is kiwi.", "It was kiwi."]
    assert [t.get("command") for t in stored["turns"]] == [None, None, "sessions"]  # the editor's command turn


async def test_sigterm_during_a_turn_records_it_cancelled_and_exits(dirs: ServerDirs) -> None:
    project = make_workspace(dirs.root / "project")
    script = [
        {"content": "Looking.", "tool_calls": [{"name": "list_dir", "arguments": {}}]},
        {"delay_s": 60, "content": "Too late."},
    ]
    session = ""
    async with spawned(dirs, script) as (conn, client), anyio.create_task_group() as tg:
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id

        async def prompt() -> None:
            with pytest.raises(ConnectionError):  # the agent went away before answering
                await conn.prompt(session_id=session, prompt=[acp.text_block("Take your time")])

        tg.start_soon(prompt)
        await client.wait_until(lambda: bool(client.ended(session)))
        process = client.process
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(WAIT_S):
            assert await process.wait() == 0

    async with Client(dirs.params([], script="last.json"), mode="auto") as client:
        stored = await structured(client, "session_get", {"session_id": session})
    assert statuses(stored) == ["cancelled"]


async def test_the_agent_exits_at_end_of_input(dirs: ServerDirs) -> None:
    """At end of input nothing is left to do: the agent leaves at once (editors SIGTERM it 100 ms later). The bound
    here is only a generous limit (a loaded machine); `bench/end_of_input.py` measures the time itself."""
    project = make_workspace(dirs.root / "project")
    async with spawned(dirs, []) as (conn, client):
        await conn.new_session(cwd=str(project), mcp_servers=[])
        process = client.process
        process.stdin.close()
        with anyio.fail_after(2):
            assert await process.wait() == 0
