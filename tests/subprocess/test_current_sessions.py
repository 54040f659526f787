"""Two server processes on one state dir (two IDE windows on one workspace) keep their own current sessions.

The current session is per connection and in memory (DESIGN 3.5); before, it was one row in the store that
every process moved. Also over Streamable HTTP: each handshake-era MCP session has its own current session,
and a 2026-07-28 request (no connection identity) without session_id starts a new session.
"""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from tests.subprocess.helpers import ServerDirs, structured
from tests.subprocess.test_http import http_server

pytestmark = pytest.mark.anyio


def _current(listed: dict[str, object]) -> list[str]:
    sessions = listed["sessions"]
    assert isinstance(sessions, list)
    return [s["session_id"] for s in sessions if s["active"]]  # pyright: ignore[reportUnknownVariableType]


async def test_two_processes_keep_their_own_current_session(dirs: ServerDirs) -> None:
    script_a = [{"content": "a1"}, {"content": "a2"}]
    script_b = [{"content": "b1"}]
    with anyio.fail_after(30):
        async with (
            Client(dirs.params(script_a, script="a.json"), mode="auto") as a,
            Client(dirs.params(script_b, script="b.json"), mode="legacy") as b,
        ):
            first_a = await structured(a, "run_turn", {"prompt": "in a"})
            made_b = await structured(b, "session_create", {"title": "b's"})
            other_b = await structured(b, "session_create", {"title": "b's other"})
            await structured(b, "session_switch", {"session_id": made_b["session_id"]})
            turn_b = await structured(b, "run_turn", {"prompt": "in b"})
            second_a = await structured(a, "run_turn", {"prompt": "in a again"})
            listed_a = await structured(a, "session_list")
            listed_b = await structured(b, "session_list")
    assert second_a["session_id"] == first_a["session_id"], "b's creates and switches did not move a"
    assert turn_b["session_id"] == made_b["session_id"] != other_b["session_id"]
    assert _current(listed_a) == [first_a["session_id"]]
    assert _current(listed_b) == [made_b["session_id"]]
    assert len(listed_a["sessions"]) == 3  # one store: each sees every session


async def test_http_connections_have_their_own_current_session(dirs: ServerDirs, free_tcp_port: int) -> None:
    script = [{"content": f"answer {i}"} for i in range(6)]
    with anyio.fail_after(30):
        async with http_server(dirs, free_tcp_port, script=script) as url:
            async with Client(url, mode="legacy") as one, Client(url, mode="legacy") as two:
                one_first = await structured(one, "run_turn", {"prompt": "x"})
                two_first = await structured(two, "run_turn", {"prompt": "y"})
                one_again = await structured(one, "run_turn", {"prompt": "x again"})
            async with Client(url, mode="auto") as modern:
                fresh = await structured(modern, "run_turn", {"prompt": "z"})
                fresh_again = await structured(modern, "run_turn", {"prompt": "z again"})
    assert one_again["session_id"] == one_first["session_id"] != two_first["session_id"]
    known = {one_first["session_id"], two_first["session_id"]}
    assert fresh["session_id"] not in known and fresh_again["session_id"] not in known | {fresh["session_id"]}
