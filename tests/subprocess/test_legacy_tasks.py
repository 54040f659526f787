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
