"""A background turn when the stdio client's process goes away: the server exits with it.

On stdin EOF the server shuts down and records the running background turn `cancelled`; a server
killed outright leaves it `running`, and the next start marks it `interrupted`.
"""

from __future__ import annotations

import signal

import anyio
import pytest
from mcp import Client

from tests.subprocess.helpers import ServerDirs, load_replay, server_env, structured, wait_for_statuses
from tests.subprocess.test_raw import INITIALIZE, tools_call

pytestmark = pytest.mark.anyio

SLOW = [{"delay_s": 60, "content": "never"}]


async def test_a_background_turn_is_recorded_cancelled_when_the_client_goes_away(dirs: ServerDirs) -> None:
    with anyio.fail_after(40):
        async with Client(dirs.params(SLOW, script="first.json")) as client:
            started = await structured(client, "run_turn", {"prompt": "slow", "background": True})
            await wait_for_statuses(client, started["session_id"], ["running"])
        # leaving the block closed the server's stdin: it shut down and stopped the turn
        async with Client(dirs.params([], script="second.json")) as client:
            args = {"turn_id": started["turn_id"], "session_id": started["session_id"]}
            got = await structured(client, "turn_get", args)
    assert got["status"] == "cancelled"


async def test_a_background_turn_of_a_killed_server_is_interrupted_at_the_next_start(dirs: ServerDirs) -> None:
    replay = load_replay()
    with anyio.fail_after(40):
        async with replay.RawServer.spawn(dirs.argv(SLOW, script="first.json"), cwd=dirs.root, env=server_env()) as raw:
            await raw.request(INITIALIZE)
            await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            answer, _ = await raw.request(tools_call(1, "run_turn", {"prompt": "slow", "background": True}))
            started = answer["result"]["structuredContent"]
            await raw.send(tools_call(2, "turn_wait", {"turn_id": started["turn_id"]}, token="wait"))
            while not str((await raw.receive()).get("params", {}).get("message", "")).startswith("turn "):
                pass  # until the wait streams the turn's first event: it has begun (and is stored `running`)
            raw.kill()  # SIGKILL to the whole process group: nothing is recorded
            assert await raw.process.wait() == -signal.SIGKILL
        async with Client(dirs.params([], script="second.json")) as client:
            args = {"turn_id": started["turn_id"], "session_id": started["session_id"]}
            got = await structured(client, "turn_get", args)
    assert got["status"] == "interrupted"
