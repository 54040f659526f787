"""Pure pieces of the ACP front door (fast tier), and the permission channel against the library's own
client over a socket pair."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import cast

import acp
import anyio
import pytest
from acp.agent.connection import AgentSideConnection
from acp.client.connection import ClientSideConnection
from acp.schema import HttpHeader, HttpMcpServer, McpServerStdio, SseMcpServer

import agent_server.doors.stream as stream_module
from agent_server import AgentRuntime, Settings
from agent_server.acp.commands import parse_command
from agent_server.acp.mcp_servers import mount_configs
from agent_server.acp.permissions import AcpApprovalChannel
from agent_server.acp.prompt_blocks import prompt_text
from agent_server.acp.updates import Update, replay, turn_updates, update_for
from agent_server.acp.wire import NdjsonWire, parse_message
from agent_server.approvals import ApprovalRequest
from agent_server.doors.show import shown
from agent_server.doors.stdio import LineReader, WireWriter
from agent_server.doors.transcript import transcript
from agent_server.errors import InvalidArgument
from agent_server.events import DoneEvent, TokenEvent, ToolResultEvent, ToolStartEvent, TurnEvent
from agent_server.presentation import Presentation
from agent_server.testing import ScriptedLLM
from agent_server.tools.builtin import SPECS as READ_SPECS
from agent_server.tools.writes import SPECS as WRITE_SPECS
from agent_server.types import Message, SessionHistory, StoredMessage, TextPart, ToolCall, ToolResult, Usage
from tests.acp.helpers import RecordingClient
from tests.fakes.clock import booted_clock

pytestmark = [pytest.mark.fast, pytest.mark.anyio]

IDS = {"turn_id": "turn_1", "session_id": "ses_1", "trace_id": "trace_1"}


@pytest.mark.parametrize("uptime_s", [5.0, 30 * 86400.0], ids=["just-booted", "up-a-month"])
async def test_token_deltas_are_coalesced_and_flushed_before_a_tool_call(
    uptime_s: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The coalescing must not depend on how long the machine has been up (its monotonic clock's reading).
    monkeypatch.setattr(stream_module, "time", booted_clock(uptime_s))
    sent: list[Update] = []

    async def send(update: Update) -> None:
        sent.append(update)

    updates = turn_updates(send, flush_interval=3600, context_window=1000)
    call = ToolCall(id="c1", name="search_text", arguments={"pattern": "x"})
    await updates(TurnEvent(**IDS, prompt="p"))
    for delta in ["Let ", "me ", "look."]:
        await updates(TokenEvent(**IDS, delta=delta))
    await updates(ToolStartEvent(**IDS, tool_round=1, call=call, kind="search"))
    result = ToolResult(call_id="c1", name="search_text", is_error=True, content=[TextPart(text="bad pattern")])
    await updates(ToolResultEvent(**IDS, tool_round=1, result=result))
    await updates(TokenEvent(**IDS, delta="Done."))
    await updates(DoneEvent(**IDS, status="completed", final_text="Done.", usage=Usage(total_tokens=42, cost_usd=0.5)))
    await updates.flush()

    kinds = [u.session_update for u in sent]
    # The first delta goes at once; the next ones wait for the interval or the next other update.
    assert kinds == [
        "agent_message_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
        "usage_update",
    ]
    texts = [u.content.text for u in sent if u.session_update == "agent_message_chunk"]
    assert texts == ["Let ", "me look.", "Done."]
    start, done, usage = sent[2], sent[3], sent[5]
    assert (start.kind, start.status, start.raw_input) == ("search", "pending", {"pattern": "x"})
    assert (done.status, done.content[0].content.text) == ("failed", "bad pattern")
    assert (usage.used, usage.size, usage.cost.amount, usage.cost.currency) == (42, 1000, 0.5, "USD")
    assert updates.turn_id == "turn_1"


async def test_each_built_in_tool_is_drawn_with_the_kind_its_spec_declares(tmp_path: Path) -> None:
    settings = Settings(workspace=tmp_path, state_dir=tmp_path / "state", tools={"write": True, "exec": True})
    async with AgentRuntime(settings, llm=ScriptedLLM([])) as runtime:
        specs = (await runtime.agent_tools()).tools
    assert {s.name for s in specs} >= set(READ_SPECS) | set(WRITE_SPECS)  # every built-in tool, from the registry
    for spec in specs:
        assert spec.kind != "other", f"{spec.name} declares no kind"
        event = ToolStartEvent(**IDS, tool_round=1, call=ToolCall(id="c1", name=spec.name), kind=spec.kind)
        item = shown(event)
        assert item is not None and update_for(item).kind == spec.kind
    unknown = shown(ToolStartEvent(**IDS, tool_round=1, call=ToolCall(id="c2", name="git__log")))
    assert unknown is not None and update_for(unknown).kind == "other"  # a mounted tool declares none


def test_replay_puts_the_summary_first_then_each_message() -> None:
    call = ToolCall(id="c1", name="read_file", arguments={"path": "a"})
    messages = [
        Message(role="user", content="hi"),
        Message(role="assistant", content="", tool_calls=[call]),
        Message(role="tool", content="A", tool_call_id="c1", name="read_file"),
        Message(role="assistant", content="bye"),
    ]
    history = SessionHistory(
        summary="earlier", messages=[StoredMessage(seq=i, turn_id="t", message=m) for i, m in enumerate(messages)]
    )
    kinds = [
        (u.session_update, getattr(getattr(u, "content", None), "text", None)) for u in replay(transcript(history))
    ]
    assert kinds == [
        ("agent_message_chunk", "Summary of the earlier conversation:\n\nearlier"),
        ("user_message_chunk", "hi"),
        ("tool_call", None),
        ("tool_call_update", None),
        ("agent_message_chunk", "bye"),
    ]


def test_prompt_blocks_become_text() -> None:
    blocks = [
        acp.text_block("Look"),
        acp.resource_link_block("a.py", "file:///a.py", title="A"),
        acp.resource_block(acp.embedded_text_resource("file:///b.py", "print(1)")),
        acp.resource_block(acp.embedded_blob_resource("file:///c.bin", "AAAA", mime_type="application/zip")),
    ]
    assert prompt_text(blocks) == (
        "Look\n\n[resource: A <file:///a.py>]\n\nContents of <file:///b.py>:\n```\nprint(1)\n```\n\n"
        "[resource <file:///c.bin> (application/zip): binary content left out]"
    )
    with pytest.raises(InvalidArgument, match="audio content is not supported"):
        prompt_text([acp.text_block("x"), acp.audio_block("AAAA", "audio/wav")])
    with pytest.raises(InvalidArgument, match="no text"):
        prompt_text([acp.text_block("  ")])


def test_client_mcp_servers_become_mount_configs(tmp_path: Path) -> None:
    stdio = McpServerStdio(name="fs", command="node", args=["x.js"], env=[acp.schema.EnvVariable(name="K", value="v")])
    http = HttpMcpServer(
        type="http", name="web", url="https://example.com/mcp", headers=[HttpHeader(name="A", value="s")]
    )
    fs, web = mount_configs([stdio, http], tmp_path)
    assert (fs.command, fs.args, fs.env, fs.cwd) == ("node", ["x.js"], {"K": "v"}, str(tmp_path))
    assert (web.url, web.headers, web.transport) == ("https://example.com/mcp", {"A": "s"}, "http")
    assert "s" in web.secrets
    with pytest.raises(InvalidArgument, match="sse servers are not supported"):
        mount_configs([SseMcpServer(type="sse", name="old", url="https://x", headers=[])], tmp_path)
    with pytest.raises(InvalidArgument, match="more than one server is named 'fs'"):
        mount_configs([stdio, stdio], tmp_path)
    with pytest.raises(InvalidArgument, match="server 'bad'"):
        mount_configs([HttpMcpServer(type="http", name="bad", url="ftp://x", headers=[])], tmp_path)


def test_slash_commands_are_parsed_and_other_prompts_are_left_to_the_model() -> None:
    compact = parse_command("/compact keep the decisions\nand names")
    assert compact is not None and (compact.name, compact.args) == ("compact", "keep the decisions\nand names")
    assert parse_command("/tools") is not None and parse_command("/fork").args == ""  # type: ignore[union-attr]
    assert parse_command("/unknown thing") is None and parse_command("compact") is None and parse_command("/") is None


# --- permissions against the library's client ------------------------------------------------------


@asynccontextmanager
async def connected(client: RecordingClient) -> AsyncGenerator[AgentSideConnection]:
    """An agent-side connection whose peer is the library's client side, over a socket pair."""
    near, far = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=near)
    client_reader, client_writer = await asyncio.open_connection(sock=far)
    agent_conn = AgentSideConnection(object(), agent_writer, agent_reader)  # routes nothing: only asks
    client_conn = ClientSideConnection(client, client_writer, client_reader)
    try:
        yield agent_conn
    finally:
        await agent_conn.close()
        await client_conn.close()
        for writer in (agent_writer, client_writer):
            writer.close()
            await writer.wait_closed()


@pytest.mark.parametrize(
    ("choice", "decision"),
    [
        ("allow_once", "allow_once"),
        ("allow_always", "allow_session"),
        ("reject_once", "deny"),
        ("reject_always", "deny"),
        (None, "cancel"),  # the client answered `cancelled`
        ("no_such_option", "deny"),
    ],
)
async def test_permission_choices_map_to_the_gate_decisions(choice: str | None, decision: str) -> None:
    client = RecordingClient(choice=choice)
    request = ApprovalRequest(
        tool="edit_file",
        arguments={"path": "a.py", "old_text": "a", "new_text": "b"},
        shown=Presentation("path: a.py"),
        source="builtin",
        kind="edit",
        session_id="ses_1",
        call_id="c1",
    )
    with anyio.fail_after(10):
        async with connected(client) as conn:
            assert (await AcpApprovalChannel(conn, "ses_1").ask(request)).choice == decision
    ((session_id, tool_call, options),) = client.permission_requests
    assert session_id == "ses_1"
    assert (tool_call.tool_call_id, tool_call.kind, tool_call.raw_input["path"]) == ("c1", "edit", "a.py")
    assert tool_call.title == "edit_file", "the tool call keeps its title; the question is its content"
    assert tool_call.content[0].content.text.startswith("Allow the agent to run edit_file?\nThe whole call")
    assert [o.kind for o in options] == ["allow_once", "allow_always", "reject_once", "reject_always"]


async def test_the_wire_ends_at_a_line_longer_than_its_limit_keeping_the_lines_before_it() -> None:
    first = b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}'
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, first + b"\n" + b"x" * 4096 + b"\n" + first + b"\n")
        os.close(write_fd)
        reader = LineReader(read_fd, max_line_bytes=1024)
        wire = NdjsonWire(reader, cast(WireWriter, None))  # nothing is answered here
        with anyio.fail_after(5):
            assert await wire.receive() == json.loads(first)
            assert await wire.receive() is None  # the stream cannot resynchronise after a cut line: it ends
    finally:
        os.close(read_fd)


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b"[" * 100_000 + b"]" * 100_000, -32700),  # deeper than the parser goes: no message, not a crash
        (b"\xff\xfe", -32700),
        (b'{"jsonrpc":"2.0","id":true,"method":"x"}', -32600),
        (b'{"jsonrpc":"2.0","id":{},"result":null}', -32600),
    ],
    ids=["nested-100000", "not-utf8", "boolean-id", "object-id"],
)
def test_lines_that_are_no_routable_message_get_their_json_rpc_error(line: bytes, code: int) -> None:
    message, error = parse_message(line)
    assert message is None and error is not None and error["code"] == code


def test_requests_notifications_and_responses_pass_the_wire_unchanged() -> None:
    for text in [
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}',
        '{"jsonrpc":"2.0","id":"a","method":"session/new"}',
        '{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}',
        '{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"cancelled"}}}',
        '{"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"no"}}',
    ]:
        assert parse_message(text.encode()) == (json.loads(text), None)
    assert parse_message(b"  ") == (None, None)
