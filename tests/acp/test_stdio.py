"""`agent-server --protocol acp` over real stdio, driven by the ACP library's own client side."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import acp
import anyio
import pytest
from acp import RequestError
from acp.connection import StreamDirection, StreamEvent
from acp.schema import McpServerStdio
from mcp import Client

from tests.acp.helpers import READ_ROUND, WAIT_S, RecordingClient, full_record, make_workspace, spawned
from tests.mounts.conftest import NODE_MODULES
from tests.subprocess.helpers import ServerDirs, structured
from tests.unit.mounts.helpers import alive, poll_until, read_pid

pytestmark = pytest.mark.anyio

FAKE_ECHO = Path(__file__).resolve().parents[1] / "fakes" / "mcp_echo.py"


def turn_of(response: Any) -> dict[str, Any]:
    return response.field_meta["agent_server"]["turn"]


async def test_a_prompt_with_one_tool_round_streams_the_updates_in_order(dirs: ServerDirs) -> None:
    project = make_workspace(dirs.root / "project")  # not the --workspace: the session's cwd is its workspace
    async with spawned(dirs, [*READ_ROUND, {"content": "Outside."}]) as (conn, client):
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        response = await conn.prompt(session_id=session, prompt=[acp.text_block("What is the secret word?")])
        await client.wait_for_kind(session, "usage_update")

        assert response.stop_reason == "end_turn"
        assert turn_of(response)["status"] == "completed"
        turn_kinds = [k for k in client.kinds(session) if k != "available_commands_update"]
        assert turn_kinds == [
            "agent_message_chunk",
            "tool_call",
            "tool_call_update",
            "tool_call_update",
            "agent_message_chunk",
            "usage_update",
        ]
        updates = [u for s, u in client.updates if s == session]
        call = next(u for u in updates if u.session_update == "tool_call")
        assert (call.kind, call.status, call.raw_input, call.title) == (
            "read",
            "pending",
            {"path": "notes.txt"},
            "read_file",
        )
        running, done = [u for u in updates if u.session_update == "tool_call_update"]
        assert running.tool_call_id == call.tool_call_id and running.status == "in_progress"
        assert done.tool_call_id == call.tool_call_id and done.status == "completed"
        assert "pomegranate" in done.content[0].content.text
        assert client.texts(session) == "Let me look.The word is pomegranate."
        usage = next(u for u in updates if u.session_update == "usage_update")
        assert (usage.used, usage.size) == (13, 128_000)
        assert response.usage is not None and response.usage.total_tokens == 13
        await client.wait_for_kind(session, "available_commands_update")
        commands = next(u for s, u in client.updates if u.session_update == "available_commands_update")
        assert {c.name for c in commands.available_commands} == {"compact", "fork", "sessions", "tools"}


async def test_the_session_tools_are_confined_to_its_cwd(dirs: ServerDirs) -> None:
    project = make_workspace(dirs.root / "project")
    (dirs.workspace / "elsewhere.txt").write_text("not in the session's workspace")
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "../ws/elsewhere.txt"}}]},
        {"content": "Refused."},
    ]
    async with spawned(dirs, script) as (conn, client):
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        await conn.prompt(session_id=session, prompt=[acp.text_block("Read it")])
        (done,) = client.ended(session)
        assert done.status == "failed"
        assert "not in the session" not in done.content[0].content.text


async def test_new_session_refuses_a_relative_or_missing_cwd(dirs: ServerDirs) -> None:
    async with spawned(dirs, []) as (conn, _client):
        for cwd in ["relative/dir", str(dirs.root / "missing")]:
            with pytest.raises(RequestError) as caught:
                await conn.new_session(cwd=cwd, mcp_servers=[])
            assert caught.value.code == -32602 and cwd in str(caught.value)
        assert (await conn.list_sessions()).sessions == []  # nothing stored for a refused session


async def test_cancel_ends_a_slow_turn_as_cancelled_and_the_session_goes_on(dirs: ServerDirs) -> None:
    project = make_workspace(dirs.root / "project")
    script = [
        {"content": "Looking.", "tool_calls": [{"name": "list_dir", "arguments": {}}]},
        {"delay_s": 60, "content": "Too late."},
        {"content": "Still here."},
    ]
    async with spawned(dirs, script) as (conn, client):
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        result: dict[str, Any] = {}

        async def prompt() -> None:
            result["response"] = await conn.prompt(session_id=session, prompt=[acp.text_block("Take your time")])

        with anyio.fail_after(WAIT_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(prompt)
                await client.wait_until(lambda: bool(client.ended(session)))  # the turn runs: its model call is slow
                await conn.cancel(session_id=session)
        response = result["response"]
        assert response.stop_reason == "cancelled"
        assert turn_of(response)["status"] == "cancelled"
        again = await conn.prompt(session_id=session, prompt=[acp.text_block("Are you there?")])
        assert again.stop_reason == "end_turn" and turn_of(again)["final_text"] == "Still here."
        listed = (await conn.list_sessions()).sessions
        assert [s.session_id for s in listed] == [session]


async def test_list_load_replay_and_resume_in_a_new_process(dirs: ServerDirs) -> None:
    project = make_workspace(dirs.root / "project")
    async with spawned(dirs, READ_ROUND) as (conn, _client):
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        await conn.prompt(session_id=session, prompt=[acp.text_block("What is the secret word?")])

    later = [{"expect_contains": ["What is the secret word?", "The word is pomegranate."], "content": "Yes."}]
    async with spawned(dirs, later) as (conn, client):
        listed = await conn.list_sessions()
        assert [(s.session_id, s.cwd) for s in listed.sessions] == [(session, str(project.resolve()))]
        assert (await conn.list_sessions(cwd="/elsewhere")).sessions == []

        await conn.load_session(cwd=str(project), session_id=session, mcp_servers=[])
        replayed = [k for k in client.kinds(session) if k != "available_commands_update"]
        assert replayed == [
            "user_message_chunk",
            "agent_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk",
        ]
        assert client.texts(session, "user_message_chunk") == "What is the secret word?"
        assert client.texts(session) == "Let me look.The word is pomegranate."

        await conn.resume_session(cwd=str(project), session_id=session, mcp_servers=[])
        response = await conn.prompt(session_id=session, prompt=[acp.text_block("Sure?")])
        assert response.stop_reason == "end_turn"

        await conn.close_session(session_id=session)
        with pytest.raises(RequestError, match="not open"):
            await conn.prompt(session_id=session, prompt=[acp.text_block("Closed?")])
        with pytest.raises(RequestError) as caught:
            await conn.load_session(cwd=str(project), session_id="ses_unknown", mcp_servers=[])
        assert caught.value.code == -32002


async def test_load_replays_the_compaction_summary_first(dirs: ServerDirs) -> None:
    project = make_workspace(dirs.root / "project")
    config = dirs.root / "config.json"
    config.write_text(json.dumps({"compact_keep_last": 1}))
    script = [{"content": "First answer."}, {"content": "Summary: the user asked once."}]
    async with spawned(dirs, script, "--config", str(config)) as (conn, client):
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        await conn.prompt(session_id=session, prompt=[acp.text_block("Hello")])
        response = await conn.prompt(session_id=session, prompt=[acp.text_block("/compact keep it short")])
        assert response.stop_reason == "end_turn"
        assert "Compacted 1 messages (llm summary); 1 kept" in client.texts(session)

    async with spawned(dirs, []) as (conn, client):
        await conn.load_session(cwd=str(project), session_id=session, mcp_servers=[])
        replayed = [
            (u.session_update, u.content.text) for s, u in client.updates if u.session_update.endswith("message_chunk")
        ]
        assert replayed[:2] == [
            ("agent_message_chunk", "Summary of the earlier conversation:\n\nSummary: the user asked once."),
            ("agent_message_chunk", "First answer."),
        ]
        assert replayed[2] == ("user_message_chunk", "/compact keep it short")  # after the summary it made
        assert replayed[3][1].startswith("Compacted 1 messages (llm summary); 1 kept") and len(replayed) == 4


@pytest.fixture
def everything_server() -> Path:
    from tests.mounts.conftest import _server  # pyright: ignore[reportPrivateUsage]

    return _server("server-everything")


async def test_a_client_provided_stdio_mcp_server_is_used_in_a_turn(dirs: ServerDirs, everything_server: Path) -> None:
    assert NODE_MODULES.is_dir()
    project = make_workspace(dirs.root / "project")
    script = [
        {"tool_calls": [{"name": "everything__echo", "arguments": {"message": "hi from the editor"}}]},
        {"expect_contains": "Echo: hi from the editor", "content": "It echoed."},
    ]
    server = McpServerStdio(name="everything", command="node", args=[str(everything_server), "stdio"], env=[])
    async with spawned(dirs, script) as (conn, client):
        session = (await conn.new_session(cwd=str(project), mcp_servers=[server])).session_id
        response = await conn.prompt(session_id=session, prompt=[acp.text_block("Echo something")])
        assert response.stop_reason == "end_turn"
        call = next(u for s, u in client.updates if u.session_update == "tool_call")
        (done,) = client.ended(session)
        assert (call.kind, done.status) == ("other", "completed")
        assert done.content[0].content.text == "Echo: hi from the editor"

        await conn.prompt(session_id=session, prompt=[acp.text_block("/tools")])
        listing = client.texts(session)
        assert "everything__echo" in listing and "server everything (stdio): ready" in listing
        other = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        await conn.prompt(session_id=other, prompt=[acp.text_block("/tools")])
        assert "everything__echo" not in client.texts(other)  # the server is that session's own


async def test_a_failed_turn_is_a_json_rpc_error_carrying_its_record(dirs: ServerDirs) -> None:
    project = make_workspace(dirs.root / "project")
    async with spawned(dirs, [{"error": {"message": "provider down"}}]) as (conn, _client):
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        with pytest.raises(RequestError) as caught:
            await conn.prompt(session_id=session, prompt=[acp.text_block("Hello")])
        assert caught.value.code == -32603
        assert str(caught.value).startswith("[turn failed] model_error:") and "provider down" in str(caught.value)
        turn = caught.value.data["turn"]
        assert (turn["status"], turn["session_id"], turn["error"]["type"]) == ("failed", session, "model_error")


async def test_a_halted_turn_stops_with_max_turn_requests(dirs: ServerDirs) -> None:
    project = make_workspace(dirs.root / "project")
    config = dirs.root / "config.json"
    config.write_text(json.dumps({"max_tool_passes": 0}))
    script = [{"tool_calls": [{"name": "list_dir", "arguments": {}}]}]
    async with spawned(dirs, script, "--config", str(config)) as (conn, _client):
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        response = await conn.prompt(session_id=session, prompt=[acp.text_block("Look around")])
        assert response.stop_reason == "max_turn_requests" and turn_of(response)["status"] == "halted"


async def test_resource_and_resource_link_blocks_become_text_the_model_sees(dirs: ServerDirs) -> None:
    project = make_workspace(dirs.root / "project")
    uri = (project / "notes.txt").as_uri()
    expected = [
        "Explain these",
        f"Contents of <{uri}>:",
        "the secret word is pomegranate",
        "[resource: spec.md <file:///spec.md>]",
    ]
    async with spawned(dirs, [{"expect_contains": expected, "content": "Done."}]) as (conn, _client):
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        blocks = [
            acp.text_block("Explain these"),
            acp.resource_block(acp.embedded_text_resource(uri, (project / "notes.txt").read_text())),
            acp.resource_link_block("spec.md", "file:///spec.md"),
        ]
        response = await conn.prompt(session_id=session, prompt=blocks)
        assert response.stop_reason == "end_turn"
        with pytest.raises(RequestError, match="image content is not supported"):
            await conn.prompt(session_id=session, prompt=[acp.image_block("aGk=", "image/png")])


async def test_fork_and_sessions_commands_and_session_fork(dirs: ServerDirs) -> None:
    project = make_workspace(dirs.root / "project")
    script = [{"content": "First."}, {"expect_contains": ["Hello", "First."], "content": "From the fork."}]
    async with spawned(dirs, script) as (conn, client):
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        await conn.prompt(session_id=session, prompt=[acp.text_block("Hello")])
        await conn.prompt(session_id=session, prompt=[acp.text_block("/fork")])
        assert client.texts(session).startswith("First.Forked this session into ses_")
        await conn.prompt(session_id=session, prompt=[acp.text_block("/sessions")])
        listing = client.texts(session).split("load it to continue there.")[1]
        assert len(listing.splitlines()) == 2 and f"{session} (this one)" in listing

        forked = (await conn.fork_session(session_id=session, cwd=str(project), mcp_servers=[])).session_id
        assert forked != session
        response = await conn.prompt(session_id=forked, prompt=[acp.text_block("Go on")])
        assert turn_of(response)["final_text"] == "From the fork."
        assert len((await conn.list_sessions()).sessions) == 3


async def test_a_sessions_mcp_servers_stop_when_it_closes_and_when_the_process_exits(dirs: ServerDirs) -> None:
    project = make_workspace(dirs.root / "project")
    fake = str(FAKE_ECHO)

    def echo_server(pid_file: Path) -> McpServerStdio:
        return McpServerStdio(name="echo", command=sys.executable, args=[fake, "--pid-file", str(pid_file)], env=[])

    first, second = dirs.root / "first.pid", dirs.root / "second.pid"
    async with spawned(dirs, []) as (conn, _client):
        closing = (await conn.new_session(cwd=str(project), mcp_servers=[echo_server(first)])).session_id
        await conn.new_session(cwd=str(project), mcp_servers=[echo_server(second)])
        pids = [await read_pid(first), await read_pid(second)]
        await conn.close_session(session_id=closing)
        await poll_until(lambda: not alive(pids[0]))
        assert alive(pids[1])  # the other session's server runs on
    await poll_until(lambda: not alive(pids[1]))  # stdin closed: the agent stopped it before leaving


WRITE_ROUND: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "written"}}]},
    {"content": "Done."},
]


@pytest.mark.parametrize(
    ("choice", "written", "decision"),
    [("allow_once", True, "allow_once"), ("reject_once", False, "deny"), (None, False, "cancelled")],
)
async def test_a_write_asks_the_editor_and_runs_only_when_allowed(
    dirs: ServerDirs, choice: str | None, written: bool, decision: str
) -> None:
    project = make_workspace(dirs.root / "project")
    client = RecordingClient(choice=choice)
    async with spawned(dirs, WRITE_ROUND, "--allow-write", client=client) as (conn, _):
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        response = await conn.prompt(session_id=session, prompt=[acp.text_block("Write out.txt")])
    turn = turn_of(response)
    assert (response.stop_reason, turn["status"]) == ("end_turn", "completed")
    ((asked_session, tool_call, options),) = client.permission_requests
    assert asked_session == session and tool_call.kind == "edit" and tool_call.raw_input["path"] == "out.txt"
    assert len(options) == 4
    assert (project / "out.txt").exists() is written
    assert turn["approval_count"] == 1  # the summary counts them; the whole record lists them
    approvals = (await full_record(dirs, turn))["approvals"]
    assert [(a["tool"], a["channel"], a["decision"]) for a in approvals] == [("write_file", "acp", decision)]


HIDDEN_PAYLOAD = "ls #" + "\u200b" * 200 + "\necho PAYLOAD > pwned.txt"
CUT_COMMAND = "echo ok " + "#" * 3000 + "\necho HIDDEN > pwned.txt"


async def test_a_permission_shows_the_whole_call_escaped_and_keeps_the_tool_calls_title(dirs: ServerDirs) -> None:
    """Before, the request renamed the tool call to a one-line question whose first 200 characters hid the
    payload; now the title stays the tool's and the content is the whole call, escaped (or says it is cut,
    with the reject options first)."""
    project = make_workspace(dirs.root / "project")
    config = dirs.root / "agent.json"
    config.write_text(json.dumps({"approvals": {"max_shown_chars": 2000}}))
    script = [
        {"tool_calls": [{"name": "run_command", "arguments": {"command": HIDDEN_PAYLOAD}}]},
        {"tool_calls": [{"name": "run_command", "arguments": {"command": CUT_COMMAND}}]},
        {"content": "Done."},
    ]
    client = RecordingClient(choice="reject_once")
    async with spawned(dirs, script, "--allow-exec", "--config", str(config), client=client) as (conn, _):
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        response = await conn.prompt(session_id=session, prompt=[acp.text_block("Run it")])
    assert turn_of(response)["status"] == "completed"
    (_, whole, whole_options), (_, cut, cut_options) = client.permission_requests
    for tool_call in (whole, cut):
        assert (tool_call.title, tool_call.kind) == ("run_command", "execute")
    text = whole.content[0].content.text
    assert "echo PAYLOAD > pwned.txt" in text and "\\u200b" in text and "\u200b" not in text
    assert [o.kind for o in whole_options] == ["allow_once", "allow_always", "reject_once", "reject_always"]
    cut_text = cut.content[0].content.text
    assert "NOT SHOWN IN FULL" in cut_text and "HIDDEN" not in cut_text
    assert [o.kind for o in cut_options][:2] == ["reject_once", "reject_always"]
    assert len(json.dumps(cut.raw_input)) < 3000, "rawInput is bounded too"
    assert not (project / "pwned.txt").exists()


class NeverAnswers(RecordingClient):
    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> Any:
        self.permission_requests.append((session_id, tool_call, options))
        self._changed.set()
        await anyio.sleep_forever()


async def test_cancel_resolves_a_pending_permission_request_as_cancelled(dirs: ServerDirs) -> None:
    project = make_workspace(dirs.root / "project")
    client = NeverAnswers()
    async with spawned(dirs, WRITE_ROUND, "--allow-write", client=client) as (conn, _):
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        result: dict[str, Any] = {}

        async def prompt() -> None:
            result["response"] = await conn.prompt(session_id=session, prompt=[acp.text_block("Write out.txt")])

        with anyio.fail_after(WAIT_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(prompt)
                await client.wait_until(lambda: bool(client.permission_requests))
                await conn.cancel(session_id=session)
    response = result["response"]
    assert response.stop_reason == "cancelled"
    turn = turn_of(response)
    assert turn["status"] == "cancelled"
    approvals = (await full_record(dirs, turn))["approvals"]
    assert [(a["tool"], a["decision"]) for a in approvals] == [("write_file", "cancelled")]
    assert not (project / "out.txt").exists()


NOT_MESSAGES = [b"[1,2,3]", b"5", b'"s"', b"null", b"true", b"[]", b'[{"jsonrpc":"2.0","id":7,"method":"x"}]']
"""Lines that are valid JSON but no JSON-RPC message object (ACP has no batches)."""
UNROUTABLE = [b'{"jsonrpc":"2.0","id":[1],"result":1}', b'{"jsonrpc":"2.0","id":3,"method":5}', b'{"jsonrpc":"2.0"}']
"""Objects whose `id` or `method` the connection cannot use, or that are neither request nor response."""


async def test_lines_that_are_no_message_are_answered_as_invalid_and_the_sessions_go_on(dirs: ServerDirs) -> None:
    project = make_workspace(dirs.root / "project")
    errors: list[dict[str, Any]] = []
    answered = anyio.Event()

    def observe(event: StreamEvent) -> None:
        if event.direction == StreamDirection.INCOMING and event.message.get("id", 0) is None:
            errors.append(event.message)
            if len(errors) == len(NOT_MESSAGES) + len(UNROUTABLE) + 1:
                answered.set()

    async with spawned(dirs, [*READ_ROUND], observers=[observe]) as (conn, client):
        stdin = client.process.stdin
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        for line in [*NOT_MESSAGES, b"not json", *UNROUTABLE]:
            stdin.write(line + b"\n")
            assert (await conn.list_sessions()).sessions[0].session_id == session  # a real request between
        with anyio.fail_after(WAIT_S):
            await answered.wait()
        response = await conn.prompt(session_id=session, prompt=[acp.text_block("What is the secret word?")])

    assert response.stop_reason == "end_turn" and turn_of(response)["final_text"] == "The word is pomegranate."
    codes = [e["error"]["code"] for e in errors]
    assert codes == [-32600] * len(NOT_MESSAGES) + [-32700] + [-32600] * len(UNROUTABLE)
    assert all(e["jsonrpc"] == "2.0" and e["id"] is None for e in errors)
    assert "batches are not supported" in errors[0]["error"]["message"]
    assert "not a number" in errors[1]["error"]["message"]


async def test_load_replays_a_rejected_call_as_failed_as_it_was_live(dirs: ServerDirs) -> None:
    """Before, the replay said `completed` for every call, the user's rejection included (its text was the
    "the user denied ..." error the model read)."""
    project = make_workspace(dirs.root / "project")
    async with spawned(dirs, WRITE_ROUND, "--allow-write", client=RecordingClient(choice="reject_once")) as (
        conn,
        live,
    ):
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        await conn.prompt(session_id=session, prompt=[acp.text_block("Write out.txt")])
    live_ends = [u.status for _, u in live.updates if u.session_update == "tool_call_update"]
    assert live_ends[-1:] == ["failed"]

    async with spawned(dirs, []) as (conn, client):
        await conn.load_session(cwd=str(project), session_id=session, mcp_servers=[])
        ends = [u for _, u in client.updates if u.session_update == "tool_call_update"]
        assert [u.status for u in ends] == ["failed"]
        assert "the user denied write_file" in ends[0].content[0].content.text


async def test_the_usage_carries_the_cache_and_reasoning_counts(dirs: ServerDirs) -> None:
    """Before, a prompt's `usage` and its `usage_update` said nothing of the cache reads and writes and of the
    reasoning tokens, which the record's usage has."""
    project = make_workspace(dirs.root / "project")
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "cache_read_tokens": 60,
        "cache_write_tokens": 30,
        "reasoning_tokens": 8,
    }
    async with spawned(dirs, [{"content": "Cached.", "usage": usage}]) as (conn, client):
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        response = await conn.prompt(session_id=session, prompt=[acp.text_block("Hello")])
        await client.wait_for_kind(session, "usage_update")
    assert response.usage is not None
    counts = response.usage
    assert (counts.input_tokens, counts.output_tokens, counts.total_tokens) == (100, 20, 120)
    assert (counts.cached_read_tokens, counts.cached_write_tokens, counts.thought_tokens) == (60, 30, 8)
    update = next(u for _, u in client.updates if u.session_update == "usage_update")
    assert update.used == 120
    assert update.field_meta["agent_server"]["usage"] == {
        "cache_read_tokens": 60,
        "cache_write_tokens": 30,
        "reasoning_tokens": 8,
    }


async def test_a_call_cancelled_while_its_permission_is_asked_ends_failed(dirs: ServerDirs) -> None:
    """Before, the call announced by `tool_call` never got a final status once the turn was cancelled with its
    permission request open: the editor's card stayed running."""
    project = make_workspace(dirs.root / "project")
    client = NeverAnswers()
    async with spawned(dirs, WRITE_ROUND, "--allow-write", client=client) as (conn, _):
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: conn.prompt(session_id=session, prompt=[acp.text_block("Write out.txt")]))
            await client.wait_until(lambda: bool(client.permission_requests))
            await conn.cancel(session_id=session)
        calls = [u for _, u in client.updates if u.session_update in ("tool_call", "tool_call_update")]
    ((_, asked, _),) = client.permission_requests
    assert {u.tool_call_id for u in calls} == {asked.tool_call_id}
    assert calls[-1].session_update == "tool_call_update" and calls[-1].status == "failed"
    assert "cancelled" in calls[-1].content[0].content.text


@dataclass
class SeesTheCall(RecordingClient):
    """Records, with each permission request, the updates of its call sent before it."""

    seen_before: list[list[tuple[str, str | None]]] = field(default_factory=list[list[tuple[str, str | None]]])

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> Any:
        call_updates = [u for _, u in self.updates if getattr(u, "tool_call_id", None) == tool_call.tool_call_id]
        self.seen_before.append([(u.session_update, u.status) for u in call_updates])
        return await super().request_permission(session_id, tool_call, options, **kwargs)


async def test_a_call_is_pending_until_allowed_then_in_progress(dirs: ServerDirs) -> None:
    """Before, a call waiting for its permission was announced `in_progress` (running) before the request said
    `pending`; ACP's `pending` is awaiting approval or not started."""
    project = make_workspace(dirs.root / "project")
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
        *WRITE_ROUND,
    ]
    client = SeesTheCall(choice="allow_once")
    async with spawned(dirs, script, "--allow-write", client=client) as (conn, _):
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        await conn.prompt(session_id=session, prompt=[acp.text_block("Read, then write out.txt")])
    assert client.seen_before == [[("tool_call", "pending")]]

    def statuses(name: str) -> list[tuple[str, str | None]]:
        call_id = next(u.tool_call_id for _, u in client.updates if u.session_update == "tool_call" and u.title == name)
        return [(u.session_update, u.status) for _, u in client.updates if getattr(u, "tool_call_id", None) == call_id]

    running = [("tool_call", "pending"), ("tool_call_update", "in_progress"), ("tool_call_update", "completed")]
    assert statuses("read_file") == running  # needs no approval: running at once
    assert statuses("write_file") == running  # running once allowed
    assert (project / "out.txt").read_text() == "written"


async def test_a_session_is_listed_with_its_first_prompt_as_title(dirs: ServerDirs) -> None:
    """Before, every session an editor made was listed as "Untitled session"."""
    project = make_workspace(dirs.root / "project")
    async with spawned(dirs, [{"content": "One."}, {"content": "Two."}]) as (conn, _client):
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        await conn.prompt(session_id=session, prompt=[acp.text_block("Refactor the parser\nplease")])
        await conn.prompt(session_id=session, prompt=[acp.text_block("And the lexer")])
        (listed,) = (await conn.list_sessions()).sessions
    assert listed.title == "Refactor the parser please"


async def test_load_replays_the_slash_command_turns_in_their_place(dirs: ServerDirs) -> None:
    """Before, a `/tools` turn was missing from the replay (the model's turns were there, not the commands')."""
    project = make_workspace(dirs.root / "project")
    async with spawned(dirs, [{"content": "Hi."}]) as (conn, live):
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        await conn.prompt(session_id=session, prompt=[acp.text_block("/tools")])
        await conn.prompt(session_id=session, prompt=[acp.text_block("Hello")])
        listing = live.texts(session).removesuffix("Hi.")
        (listed,) = (await conn.list_sessions()).sessions
    assert "read_file" in listing
    assert listed.title == "Hello"  # a command names no session

    async with spawned(dirs, [{"expect_contains": "Hello", "content": "Yes."}]) as (conn, client):
        await conn.load_session(cwd=str(project), session_id=session, mcp_servers=[])
        replayed = [
            (u.session_update, u.content.text) for _, u in client.updates if u.session_update.endswith("message_chunk")
        ]
        response = await conn.prompt(session_id=session, prompt=[acp.text_block("Did the model see /tools?")])
    assert replayed == [
        ("user_message_chunk", "/tools"),
        ("agent_message_chunk", listing),
        ("user_message_chunk", "Hello"),
        ("agent_message_chunk", "Hi."),
    ]
    assert turn_of(response)["status"] == "completed"


async def test_a_prompts_answer_carries_the_same_turn_summary_as_mcp_results(dirs: ServerDirs) -> None:
    project = make_workspace(dirs.root / "project")
    async with spawned(dirs, READ_ROUND) as (conn, _client):
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        response = await conn.prompt(session_id=session, prompt=[acp.text_block("What is the secret word?")])
    summary = turn_of(response)
    async with Client(dirs.params([], script="reader.json"), mode="auto") as client:
        over_mcp = await structured(client, "turn_get", {"turn_id": summary["turn_id"]})
    assert summary == over_mcp
    assert "tool_rounds" not in summary and summary["tool_calls"][0]["name"] == "read_file"


async def test_a_prompt_chooses_its_turns_options_in_meta_as_run_turn_does_over_mcp(dirs: ServerDirs) -> None:
    project = make_workspace(dirs.root / "project")
    script = [{"tool_calls": [{"name": "list_dir", "arguments": {}}]}]
    async with spawned(dirs, script) as (conn, _client):
        session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        limited = {"agent_server": {"options": {"max_tool_passes": 0}}}
        response = await conn.prompt(session_id=session, prompt=[acp.text_block("Look around")], **limited)
        assert response.stop_reason == "max_turn_requests" and turn_of(response)["status"] == "halted"
        with pytest.raises(RequestError) as caught:
            bad = {"agent_server": {"options": {"max_tool_passes": -1, "colour": "red"}}}
            await conn.prompt(session_id=session, prompt=[acp.text_block("Again")], **bad)
    assert caught.value.code == -32602
    assert "max_tool_passes" in str(caught.value) and "colour: unknown argument" in str(caught.value)
