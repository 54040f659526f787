"""Real `agent-server` processes over stdio, driven by the SDK's `Client`, in both protocol eras."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.subprocess.helpers import (
    MODES,
    PROTOCOL,
    Progress,
    ServerDirs,
    server_env,
    statuses,
    strictly_increasing,
    structured,
    wait_for_statuses,
)

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", MODES)
async def test_two_round_turn_reads_a_file_and_streams_progress(dirs: ServerDirs, mode: str) -> None:
    (dirs.workspace / "notes.txt").write_text("line one\nthe launch code is 4711\n")
    script = [
        {"content": "Let me read it.", "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"expect_contains": "the launch code is 4711", "content": "The launch code is 4711."},
    ]
    progress = Progress()
    with anyio.fail_after(20):
        async with Client(dirs.params(script), mode=mode) as client:
            assert client.protocol_version == PROTOCOL[mode]
            result = await client.call_tool("run_turn", {"prompt": "What is the code?"}, progress_callback=progress)
    record = result.structured_content
    assert record is not None
    assert result.is_error is False, result.content
    assert record["status"] == "completed", record
    assert record["final_text"] == "The launch code is 4711."
    assert [(c["name"], c["is_error"]) for c in record["tool_calls"]] == [("read_file", False)]
    assert len(progress.updates) >= 5
    assert strictly_increasing(progress.values), progress.values
    assert "sampling (round 1)" in progress.messages and "sampling (round 2)" in progress.messages
    assert any(m.startswith("read_file: ok in") for m in progress.messages), progress.messages
    assert progress.messages[-1] == "done: completed"


async def test_sessions_and_turns_survive_a_restart(dirs: ServerDirs) -> None:
    first = [{"content": "First answer."}, {"expect_contains": "First answer.", "content": "Second answer."}]
    second = [{"expect_contains": ["First answer.", "Second answer."], "content": "Third answer."}]
    with anyio.fail_after(30):
        async with Client(dirs.params(first, script="first.json"), mode="auto") as client:
            session_id = (await structured(client, "session_create", {"title": "kept"}))["session_id"]
            one = await structured(client, "run_turn", {"prompt": "one", "session_id": session_id})
            two = await structured(client, "run_turn", {"prompt": "two", "session_id": session_id})
        # The first process has exited; a new one (in the other era, why not) reads the same state dir.
        async with Client(dirs.params(second, script="second.json"), mode="legacy") as client:
            listed = (await structured(client, "session_list"))["sessions"]
            before = await structured(client, "session_get", {"session_id": session_id})
            three = await structured(client, "run_turn", {"prompt": "three", "session_id": session_id})
            after = await structured(client, "session_get", {"session_id": session_id})
    assert [(s["session_id"], s["title"], s["turn_count"]) for s in listed] == [(session_id, "kept", 2)]
    assert [t["turn_id"] for t in before["turns"]] == [one["turn_id"], two["turn_id"]]
    assert statuses(before) == ["completed", "completed"]
    assert [t["final_text"] for t in before["turns"]] == ["First answer.", "Second answer."]
    assert before["turns"][1] == two  # the whole record, as the first process returned it
    assert three["status"] == "completed", three  # the restarted model saw the old history
    assert statuses(after) == ["completed"] * 3


@pytest.mark.parametrize("mode", MODES)
async def test_client_cancellation_records_a_cancelled_turn(dirs: ServerDirs, mode: str) -> None:
    script = [{"delay_s": 60, "content": "never"}, {"content": "after cancel"}]
    progress = Progress()
    with anyio.fail_after(20):
        async with Client(dirs.params(script), mode=mode) as client:
            session_id = (await structured(client, "session_create"))["session_id"]
            async with anyio.create_task_group() as tg:

                async def slow_turn() -> None:
                    await client.call_tool(
                        "run_turn", {"prompt": "slow", "session_id": session_id}, progress_callback=progress
                    )
                    raise AssertionError("the slow turn returned instead of being cancelled")

                tg.start_soon(slow_turn)
                await progress.sampling.wait()
                tg.cancel_scope.cancel()
            cancelled = await wait_for_statuses(client, session_id, ["cancelled"])
            after = await structured(client, "run_turn", {"prompt": "next", "session_id": session_id})
            session = await structured(client, "session_get", {"session_id": session_id})
    assert cancelled["turns"][0]["error"]["type"] == "cancelled"
    assert after["status"] == "completed" and after["final_text"] == "after cancel"
    assert statuses(session) == ["cancelled", "completed"]


async def test_two_processes_side_by_side_on_one_state_dir(dirs: ServerDirs) -> None:
    """Two servers (two IDE windows) share a state dir: concurrent turns, no lost writes, no false `interrupted`."""
    turns_each = 3
    script_a = [{"delay_s": 60, "content": "never"}] + [{"content": "from A"}] * turns_each
    script_b = [{"content": "from B"}] * turns_each
    progress = Progress()
    results: list[dict[str, Any]] = []

    async def run(client: Client, session_id: str, prompt: str) -> None:
        results.append(await structured(client, "run_turn", {"prompt": prompt, "session_id": session_id}))

    with anyio.fail_after(40):
        async with Client(dirs.params(script_a, script="a.json"), mode="auto") as a:
            slow_id = (await structured(a, "session_create", {"title": "slow"}))["session_id"]
            a_id = (await structured(a, "session_create", {"title": "A"}))["session_id"]
            async with anyio.create_task_group() as slow_group:

                async def slow_turn() -> None:
                    await a.call_tool("run_turn", {"prompt": "slow", "session_id": slow_id}, progress_callback=progress)

                slow_group.start_soon(slow_turn)
                await progress.sampling.wait()
                # B starts (and scans for dead processes' turns) while A has a turn running.
                async with Client(dirs.params(script_b, script="b.json"), mode="legacy") as b:
                    seen_by_b_at_start = await structured(b, "session_get", {"session_id": slow_id})
                    b_id = (await structured(b, "session_create", {"title": "B"}))["session_id"]
                    async with anyio.create_task_group() as tg:
                        for i in range(turns_each):
                            tg.start_soon(run, a, a_id, f"A{i}")
                            tg.start_soon(run, b, b_id, f"B{i}")
                    listed = (await structured(b, "session_list"))["sessions"]
                    a_seen_by_b = await structured(b, "session_get", {"session_id": a_id})
                    b_seen_by_a = await structured(a, "session_get", {"session_id": b_id})
                # B has exited; its shutdown must not touch A's running turn either.
                seen_by_a_after_b = await structured(a, "session_get", {"session_id": slow_id})
                slow_group.cancel_scope.cancel()
            slow_final = await wait_for_statuses(a, slow_id, ["cancelled"])

    assert statuses(seen_by_b_at_start) == ["running"]
    assert statuses(seen_by_a_after_b) == ["running"]
    assert slow_final["turns"][0]["error"]["type"] == "cancelled"
    assert len(results) == 2 * turns_each
    assert all(r["status"] == "completed" and r["error"] is None for r in results), results
    assert sorted(r["final_text"] for r in results) == ["from A"] * turns_each + ["from B"] * turns_each
    assert {s["title"]: s["turn_count"] for s in listed} == {"slow": 1, "A": turns_each, "B": turns_each}
    assert statuses(a_seen_by_b) == ["completed"] * turns_each
    assert statuses(b_seen_by_a) == ["completed"] * turns_each
    assert {t["final_text"] for t in a_seen_by_b["turns"]} == {"from A"}
    assert {t["final_text"] for t in b_seen_by_a["turns"]} == {"from B"}
    turn_ids = {r["turn_id"] for r in results}
    assert turn_ids == {t["turn_id"] for t in a_seen_by_b["turns"] + b_seen_by_a["turns"]}


async def test_closing_stdin_mid_turn_records_it_cancelled(dirs: ServerDirs) -> None:
    """On stdio a disconnect (the client's end of stdin closes) ends the server; the turn is recorded `cancelled`."""
    script = [{"delay_s": 60, "content": "never"}, {"content": "later"}]
    with anyio.fail_after(30):
        async with Client(dirs.params(script), mode="legacy") as client:
            session_id = (await structured(client, "session_create"))["session_id"]
        hello = {
            "protocolVersion": PROTOCOL["legacy"],
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        }
        call = {
            "name": "run_turn",
            "arguments": {"prompt": "slow", "session_id": session_id},
            "_meta": {"progressToken": 1},
        }
        lines = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
        ]
        command, *args = dirs.argv(script)
        async with await anyio.open_process([command, *args], env=server_env()) as process:
            assert process.stdin is not None and process.stdout is not None
            await process.stdin.send(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
            received = b""
            async for chunk in process.stdout:
                received += chunk
                if b"sampling" in received:
                    break
            await process.stdin.aclose()
            assert await process.wait() == 0
        async with Client(dirs.params(script), mode="legacy") as client:
            session = await structured(client, "session_get", {"session_id": session_id})
    assert statuses(session) == ["cancelled"]
