"""Raw JSON-RPC over a server's pipes: a hard kill mid-turn, and the recorded transcript of clients/raw/."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.subprocess.helpers import ServerDirs, load_replay, server_env, statuses, structured

pytestmark = pytest.mark.anyio

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
}


def tools_call(request_id: int, name: str, arguments: dict[str, object], token: str | None = None) -> dict[str, object]:
    params: dict[str, object] = {"name": name, "arguments": arguments}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def is_sampling(progress: dict[str, object]) -> bool:
    return str(progress.get("message", "")).startswith("sampling")


async def test_turn_left_running_by_a_killed_process_is_interrupted_at_next_start(dirs: ServerDirs) -> None:
    replay = load_replay()
    command = dirs.argv([{"delay_s": 60, "content": "never"}], script="first.json")
    with anyio.fail_after(30):
        async with replay.RawServer.spawn(command, cwd=dirs.root, env=server_env()) as raw:
            init, _ = await raw.request(INITIALIZE)
            assert init["result"]["protocolVersion"] == "2025-11-25"
            await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            created, _ = await raw.request(tools_call(1, "session_create", {"title": "doomed"}))
            session_id = created["result"]["structuredContent"]["session_id"]
            await raw.send(tools_call(2, "run_turn", {"prompt": "slow", "session_id": session_id}, token="slow"))
            while True:
                message = await raw.receive()
                assert "id" not in message, f"the slow turn answered: {message}"
                if message["method"] == "notifications/progress" and is_sampling(message["params"]):
                    break
            raw.kill()  # SIGKILL to the server's whole process group: no cleanup runs
            assert await raw.process.wait() == -signal.SIGKILL
        assert not raw.invalid

        async with Client(dirs.params([{"content": "still usable"}], script="second.json")) as client:
            before = await structured(client, "session_get", {"session_id": session_id})
            after_turn = await structured(client, "run_turn", {"prompt": "again", "session_id": session_id})
            after = await structured(client, "session_get", {"session_id": session_id})
    (turn,) = before["turns"]
    assert turn["status"] == "interrupted", turn
    assert turn["error"]["type"] == "interrupted"
    assert after_turn["status"] == "completed" and after_turn["final_text"] == "still usable"
    assert statuses(after) == ["interrupted", "completed"]


async def test_raw_transcript_replays_and_stdout_carries_only_json_rpc(tmp_path: Path) -> None:
    replay = load_replay()
    command = [sys.executable, "-m", "agent_server", "--llm", f"script:{replay.SCRIPT}", "--log-level", "DEBUG"]
    transcript = replay.load_jsonl(replay.TRANSCRIPT)
    expectations = replay.load_jsonl(replay.EXPECTED)
    with anyio.fail_after(30):
        report = await replay.replay(command, transcript, expectations, workdir=tmp_path, env=server_env())

    failures = [f"{step.name}: {step.detail}" for step in report.steps if not step.ok]
    assert not failures, "\n".join(failures) + "\n--- stderr ---\n" + report.stderr[-3000:]
    # Every stdout line parsed as a JSON-RPC 2.0 response or notification (no stray requests either).
    assert report.lines and not report.invalid
    kinds = set()
    for line in report.lines:
        message, problem = replay.parse_jsonrpc(line)
        assert message is not None, problem
        kinds.add(replay.kind_of(message))
    assert kinds == {"response", "notification"}
    # One response per request, in order, and every expectation was checked.
    requests = [m["id"] for m in transcript if "id" in m]
    assert list(report.responses) == requests
    assert {e["id"] for e in expectations} == set(requests)
    assert report.responses[7]["error"]["code"] == -32602  # unknown tool: a JSON-RPC error
    assert report.responses[6]["result"]["isError"] is True  # bad arguments: a tool error result
    # DEBUG logging went to stderr, none of it to stdout.
    debug_lines = [line for line in report.stderr.splitlines() if " DEBUG " in line]
    assert any("agent_server" in line for line in debug_lines), report.stderr[-2000:]
    assert not any("DEBUG" in line for line in report.lines)
    assert report.returncode == 0


NOT_MESSAGES = [
    *(b"[1,2,3]", b"5", b'"s"', b"null", b"true", b"[]", b"not json"),
    b'{"jsonrpc":"2.0","id":[1],"result":1}',
]
"""Lines that are no JSON-RPC message the server can route (the ACP door answers the same lines, tests/acp/)."""


async def test_lines_that_are_no_message_leave_the_stdio_server_serving(dirs: ServerDirs) -> None:
    # The SDK parses each line itself and drops (logs) one that is no JSON-RPC message; the process goes on.
    replay = load_replay()
    with anyio.fail_after(30):
        async with replay.RawServer.spawn(dirs.argv([]), cwd=dirs.root, env=server_env()) as raw:
            await raw.request(INITIALIZE)
            await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            for request_id, line in enumerate(NOT_MESSAGES, start=1):
                assert raw.process.stdin is not None
                await raw.process.stdin.send(line + b"\n")
                answer, others = await raw.request(tools_call(request_id, "session_list", {}))
                assert answer["result"]["structuredContent"]["sessions"] == [], line
                assert others == []  # no stray answer, and nothing else
            assert await raw.finish() == 0
        assert not raw.invalid


NO_EVENTS = "has no progress token: its turn builds and sends no events"


async def test_over_stdio_a_call_without_a_progress_token_builds_no_events_and_one_with_gets_them(
    dirs: ServerDirs, tmp_path: Path
) -> None:
    replay = load_replay()
    command = dirs.argv([{"content": "one"}, {"content": "two"}], log_level="debug")
    log = tmp_path / "stderr.log"
    with anyio.fail_after(30), log.open("wb") as stderr:
        async with replay.RawServer.spawn(command, cwd=dirs.root, env=server_env(), stderr=stderr) as raw:
            await raw.request(INITIALIZE)
            await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            quiet, before = await raw.request(tools_call(1, "run_turn", {"prompt": "quiet"}))
            told, notes = await raw.request(tools_call(2, "run_turn", {"prompt": "told"}, token="t"))
    assert quiet["result"]["structuredContent"]["final_text"] == "one" and before == []
    assert told["result"]["structuredContent"]["final_text"] == "two"
    assert notes and all(n["method"] == "notifications/progress" for n in notes)
    lines = [line for line in log.read_text().splitlines() if NO_EVENTS in line]
    assert [line.split("request ")[1].split(" ")[0] for line in lines] == ["1"], lines
