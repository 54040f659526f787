"""2025-11-25 experimental tasks over real stdio, as VS Code sends them (raw JSON-RPC): a task-augmented
run_turn, tasks/get, a blocking tasks/result, tasks/list and tasks/cancel."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from tests.subprocess.helpers import ServerDirs, load_replay, server_env
from tests.subprocess.test_raw import INITIALIZE

pytestmark = pytest.mark.anyio

SCRIPT = [{"content": "Finished as a task."}, {"delay_s": 60, "content": "never"}]


def _request(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def _task_call(request_id: int, prompt: str) -> dict[str, Any]:
    params = {"name": "run_turn", "arguments": {"prompt": prompt, "session_id": "new"}, "task": {"ttl": 60000}}
    return _request(request_id, "tools/call", params)


async def test_a_task_augmented_run_turn_in_the_handshake_era(dirs: ServerDirs) -> None:
    replay = load_replay()
    with anyio.fail_after(40):
        async with replay.RawServer.spawn(dirs.argv(SCRIPT), cwd=dirs.root, env=server_env()) as raw:

            async def call(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
                response, _ = await raw.request(_request(request_id, method, params))
                return response

            init, _ = await raw.request(INITIALIZE)
            await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            listed = await call(1, "tools/list", {})
            first, _ = await raw.request(_task_call(2, "quick"))
            task_id = first["result"]["task"]["taskId"]
            result = await call(3, "tasks/result", {"taskId": task_id})  # blocks until the turn ends
            done = await call(4, "tasks/get", {"taskId": task_id})
            second, _ = await raw.request(_task_call(5, "slow"))
            slow_id = second["result"]["task"]["taskId"]
            working = await call(6, "tasks/get", {"taskId": slow_id})
            tasks = await call(7, "tasks/list", {})
            cancelled = await call(8, "tasks/cancel", {"taskId": slow_id})
            after = await call(9, "tasks/get", {"taskId": slow_id})
            again = await call(10, "tasks/cancel", {"taskId": slow_id})
            unknown = await call(11, "tasks/get", {"taskId": "no-such-task"})
            slow_result = await call(12, "tasks/result", {"taskId": slow_id})
    capabilities = init["result"]["capabilities"]
    assert capabilities["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    run_turn = next(t for t in listed["result"]["tools"] if t["name"] == "run_turn")
    assert run_turn["execution"] == {"taskSupport": "optional"}
    assert first["result"]["task"]["status"] == "working"
    assert result["result"]["structuredContent"]["final_text"] == "Finished as a task."
    assert result["result"]["content"][0]["text"] == "Finished as a task."
    assert result["result"]["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
    assert done["result"]["status"] == "completed"
    assert working["result"]["status"] == "working"
    assert [t["taskId"] for t in tasks["result"]["tasks"]] == [slow_id, task_id]  # newest first
    assert cancelled["result"]["status"] == "cancelled"
    assert after["result"]["status"] == "cancelled"
    assert again["error"]["code"] == -32602  # it ended already
    assert unknown["error"]["code"] == -32602
    assert slow_result["result"]["structuredContent"]["status"] == "cancelled"


HIDDEN = "ls #" + "\u200b" * 200 + "\necho PAYLOAD > pwned.txt"


async def test_a_tasks_approval_goes_to_the_client_while_tasks_result_waits(dirs: ServerDirs) -> None:
    """`input_required` the 2025-11-25 way: the client calls `tasks/result`, and the server sends the approval
    question as `elicitation/create` tied to the task: the whole call, escaped. Before, nobody was asked and
    the turn waited until `approvals.timeout_s`."""
    script = [
        {"tool_calls": [{"name": "run_command", "arguments": {"command": HIDDEN}}]},
        {"expect_contains": "the user denied run_command", "content": "Not run."},
    ]
    initialize = {**INITIALIZE, "params": {**INITIALIZE["params"], "capabilities": {"elicitation": {"form": {}}}}}
    replay = load_replay()
    with anyio.fail_after(40):
        async with replay.RawServer.spawn([*dirs.argv(script), "--allow-exec"], cwd=dirs.root, env=server_env()) as raw:
            await raw.request(initialize)
            await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            started, _ = await raw.request(_task_call(1, "run it"))
            task_id = started["result"]["task"]["taskId"]
            await raw.send(_request(2, "tasks/result", {"taskId": task_id}))
            asked: list[dict[str, Any]] = []
            while True:
                message = await raw.receive()
                if message.get("method") == "elicitation/create":
                    asked.append(message["params"])
                    answer = {"action": "accept", "content": {"decision": "deny"}}
                    await raw.send({"jsonrpc": "2.0", "id": message["id"], "result": answer})
                elif message.get("id") == 2:
                    result = message["result"]
                    break
    (params,) = asked
    assert params["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
    assert "echo PAYLOAD > pwned.txt" in params["message"] and "\\u200b" * 200 in params["message"]
    assert "\u200b" not in params["message"]
    record = result["structuredContent"]
    assert result["content"][0]["text"] == "Not run."
    assert record["status"] == "completed" and record["approval_count"] == 1
    assert not (dirs.workspace / "pwned.txt").exists()
