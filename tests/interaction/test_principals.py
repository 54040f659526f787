"""Principals end to end in memory (DESIGN 3.10): what one principal makes, another finds nowhere, in both eras.

Two in-memory clients of one server act for `alice` and `bob` the way a verified bearer token makes a request
over HTTP (the SDK's auth context holds the `AccessToken`); the real HTTP door is in tests/subprocess.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client import ClientRequestContext
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from pydantic import BaseModel

from agent_server.llm.scripted import ScriptedLLM
from agent_server.server.app import create_server
from tests.interaction.harness import MODES, make_settings
from tests.interaction.test_tasks import mcp_tasks

pytestmark = pytest.mark.anyio


@contextmanager
def acting_as(principal: str) -> Iterator[None]:
    """What is done in the block is `principal`'s, as the SDK's bearer middleware makes an HTTP request."""
    user = AuthenticatedUser(AccessToken(token="", client_id=principal, scopes=[], subject=principal))
    reset = auth_context_var.set(user)
    try:
        yield
    finally:
        auth_context_var.reset(reset)


@dataclass
class As:
    """One principal's client."""

    principal: str
    client: Client

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        with acting_as(self.principal):
            return await self.client.call_tool(tool, arguments or {})

    async def ok(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        result = await self.call(tool, arguments)
        assert result.is_error is False, (tool, result.content)
        assert result.structured_content is not None
        return result.structured_content

    async def error_type(self, tool: str, arguments: dict[str, Any]) -> str:
        result = await self.call(tool, arguments)
        assert result.is_error is True, (tool, result.structured_content)
        return (result.structured_content or {})["error"]["type"]


@asynccontextmanager
async def principals(
    tmp_path: Path,
    responses: Sequence[dict[str, Any]],
    *,
    mode: str,
    names: Sequence[str] = ("alice", "bob"),
    client_options: dict[str, Any] | None = None,
    **overrides: Any,
) -> AsyncIterator[list[As]]:
    """One server, one client per principal; the whole block bounded."""
    server = create_server(make_settings(tmp_path, **overrides), llm=ScriptedLLM(list(responses)))
    with anyio.fail_after(30):
        async with AsyncExitStack() as stack:
            clients: list[As] = []
            for name in names:
                with acting_as(name):  # a handshake-era connection serves in the context it was opened in
                    client = await stack.enter_async_context(Client(server, mode=mode, **(client_options or {})))
                clients.append(As(name, client))
            yield clients


@pytest.mark.parametrize("mode", MODES)
async def test_another_principals_session_and_turns_are_not_found_by_any_tool(tmp_path: Path, mode: str) -> None:
    async with principals(tmp_path, [{"content": "alice's answer"}], mode=mode) as (alice, bob):
        session = (await alice.ok("session_create", {"title": "alice's"}))["session_id"]
        turn = await alice.ok("run_turn", {"prompt": "hi", "session_id": session})
        turn_id = turn["turn_id"]
        listed = await bob.ok("session_list")
        unknown = {"session_id": "ses_0000000000000000"}
        by_session = {
            "session_get": {"session_id": session},
            "session_switch": {"session_id": session},
            "session_fork": {"session_id": session},
            "session_delete": {"session_id": session},
            "compact": {"session_id": session},
            "run_turn": {"prompt": "mine now", "session_id": session},
            "turn_get": {"turn_id": turn_id, "session_id": session},
        }
        refused = {tool: await bob.error_type(tool, arguments) for tool, arguments in by_session.items()}
        as_unknown = await bob.call("session_get", unknown)
        as_foreign = await bob.call("session_get", {"session_id": session})
        by_turn = {tool: await bob.error_type(tool, {"turn_id": turn_id}) for tool in ("turn_get", "turn_wait")}
        still = await alice.ok("session_get", {"session_id": session})
        mine = await alice.ok("session_list")
    assert listed["sessions"] == []
    assert set(refused.values()) == {"session_not_found"}, refused
    assert by_turn == {"turn_get": "turn_not_found", "turn_wait": "turn_not_found"}
    # Not "forbidden": the answer for another's id is the answer for an id nobody has.
    foreign_text = as_foreign.content[0].text  # pyright: ignore[reportAttributeAccessIssue]
    unknown_text = as_unknown.content[0].text  # pyright: ignore[reportAttributeAccessIssue]
    assert foreign_text.replace(session, "ID") == unknown_text.replace(unknown["session_id"], "ID")
    assert [t["final_text"] for t in still["turns"]] == ["alice's answer"]  # nothing of bob's reached it
    assert [s["session_id"] for s in mine["sessions"]] == [session]


@pytest.mark.parametrize("mode", MODES)
async def test_turn_get_finds_a_finished_foreground_turn_by_its_id_alone(tmp_path: Path, mode: str) -> None:
    """DESIGN 3.2: the turn id is enough (it needed its `session_id` once the turn was no background one)."""
    async with principals(tmp_path, [{"content": "done"}], mode=mode, names=["alice"]) as (alice,):
        turn = await alice.ok("run_turn", {"prompt": "hi", "session_id": "new"})
        got = await alice.ok("turn_get", {"turn_id": turn["turn_id"]})
        waited = await alice.ok("turn_wait", {"turn_id": turn["turn_id"], "timeout_s": 5})
    assert (got["turn_id"], got["status"], got["final_text"]) == (turn["turn_id"], "completed", "done")
    assert (waited["status"], waited["session_id"]) == ("completed", turn["session_id"])


@pytest.mark.parametrize("mode", MODES)
async def test_the_connections_current_session_is_each_principals_own(tmp_path: Path, mode: str) -> None:
    """Both clients are the same connection to the server (in memory: the process); their current sessions differ."""
    script = [{"content": "a1"}, {"content": "b1"}, {"content": "a2"}]
    async with principals(tmp_path, script, mode=mode) as (alice, bob):
        first = await alice.ok("run_turn", {"prompt": "one"})
        other = await bob.ok("run_turn", {"prompt": "two"})
        again = await alice.ok("run_turn", {"prompt": "three"})
    assert again["session_id"] == first["session_id"] != other["session_id"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_background_turn_is_followed_and_cancelled_by_its_principal_only(tmp_path: Path, mode: str) -> None:
    async with principals(tmp_path, [{"delay_s": 30, "content": "slow"}], mode=mode) as (alice, bob):
        started = await alice.ok("run_turn", {"prompt": "slow", "session_id": "new", "background": True})
        turn_id = started["turn_id"]
        foreign = {
            tool: await bob.error_type(tool, {"turn_id": turn_id}) for tool in ("turn_get", "turn_wait", "turn_cancel")
        }
        running = await alice.ok("turn_get", {"turn_id": turn_id})
        cancelled = await alice.ok("turn_cancel", {"turn_id": turn_id})
    assert set(foreign.values()) == {"turn_not_found"}, foreign
    assert running["status"] == "running"  # bob's turn_cancel did not reach it
    assert cancelled["status"] == "cancelled"


async def test_a_2026_task_is_its_principals_only(tmp_path: Path) -> None:
    task_ids: list[str] = []
    created = anyio.Event()

    def on_task(task_id: str) -> None:
        task_ids.append(task_id)
        created.set()

    extension = {"extensions": [mcp_tasks().TasksExtension(on_task=on_task)]}
    script = [{"delay_s": 30, "content": "slow"}]
    clients = principals(tmp_path, script, mode="auto", client_options=extension)
    async with clients as (alice, bob), anyio.create_task_group() as tg:
        tg.start_soon(alice.call, "run_turn", {"prompt": "slow", "session_id": "new"})
        await created.wait()
        with acting_as("bob"), pytest.raises(MCPError) as unknown:
            await mcp_tasks().get_task(bob.client.session, task_ids[0])
        with acting_as("bob"):
            await mcp_tasks().cancel(bob.client.session, task_ids[0])  # acknowledged, and nothing happens
            await mcp_tasks().update(bob.client.session, task_ids[0], {"approve-x": {}})
        with acting_as("alice"):
            working = await mcp_tasks().get_task(alice.client.session, task_ids[0])
            await mcp_tasks().cancel(alice.client.session, task_ids[0])
    assert unknown.value.code == types.INVALID_PARAMS
    assert working.status == "working"


class _Listed(BaseModel):
    tasks: list[dict[str, Any]]


async def test_a_handshake_era_task_is_its_principals_only(tmp_path: Path) -> None:
    script = [{"delay_s": 30, "content": "slow"}]
    arguments = {"name": "run_turn", "arguments": {"prompt": "slow", "session_id": "new"}, "task": {"ttl": 60_000}}
    async with principals(tmp_path, script, mode="legacy") as (alice, bob):
        with acting_as("alice"):
            # Sent raw: the SDK client would read a task-augmented `tools/call`'s answer as a `CallToolResult`.
            dispatcher: Any = alice.client.session._dispatcher  # pyright: ignore[reportPrivateUsage]
            created = await dispatcher.send_raw_request("tools/call", arguments, {})
        task_id = created["task"]["taskId"]
        get = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
        cancel = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
        with acting_as("bob"):
            with pytest.raises(MCPError) as unknown:
                await bob.client.session.send_request(get, types.GetTaskResult)
            listed = await bob.client.session.send_request(types.ListTasksRequest(), _Listed)
            with pytest.raises(MCPError) as not_cancelled:
                await bob.client.session.send_request(cancel, types.CancelTaskResult)
        with acting_as("alice"):
            working = await alice.client.session.send_request(get, types.GetTaskResult)
            mine = await alice.client.session.send_request(types.ListTasksRequest(), _Listed)
            await alice.client.session.send_request(cancel, types.CancelTaskResult)
    assert unknown.value.code == not_cancelled.value.code == types.INVALID_PARAMS
    assert listed.tasks == []
    assert working.status == "working"
    assert [t["taskId"] for t in mine.tasks] == [task_id]


async def _never_answered(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    raise AssertionError("the rounds are answered by hand here")


def _writing(path: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": "x"}}]}


ROUNDS = {"elicitation_callback": _never_answered}
"""The client declares form elicitation, so an approval parks its turn and the call answers with a round."""


async def _round(who: As, prompt: str) -> types.CallToolResult | types.InputRequiredResult:
    with acting_as(who.principal):
        arguments = {"prompt": prompt, "session_id": "new"}
        return await who.client.session.call_tool("run_turn", arguments, allow_input_required=True)


async def test_a_parked_round_is_resumed_by_its_principal_only(tmp_path: Path) -> None:
    script = [_writing("a.txt"), {"content": "written"}]
    options = {"tools": {"write": True}}
    async with principals(tmp_path, script, mode="auto", client_options=ROUNDS, **options) as (alice, bob):
        first = await _round(alice, "write a.txt")
        assert isinstance(first, types.InputRequiredResult) and first.input_requests is not None
        (key,) = first.input_requests
        allow = types.ElicitResult(action="accept", content={"decision": "allow_once"})
        retry: dict[str, Any] = {"input_responses": {key: allow}, "request_state": first.request_state}
        with acting_as("bob"):
            try:
                stolen: Any = await bob.client.session.call_tool(
                    "run_turn", {"prompt": "write a.txt", "session_id": "new"}, allow_input_required=True, **retry
                )
            except MCPError as exc:  # the SDK binds a sealed state to its principal
                stolen = exc
        with acting_as("alice"):
            done = await alice.client.session.call_tool(
                "run_turn", {"prompt": "write a.txt", "session_id": "new"}, allow_input_required=True, **retry
            )
    if isinstance(stolen, MCPError):
        assert stolen.error.code == types.INVALID_PARAMS
    else:
        assert isinstance(stolen, types.CallToolResult) and stolen.is_error
    assert isinstance(done, types.CallToolResult) and done.structured_content is not None
    assert done.structured_content["status"] == "completed"  # the turn waited on for alice, who answered
    assert (tmp_path / "ws" / "a.txt").read_text() == "x"


async def test_a_flood_of_unanswered_approval_rounds_is_refused_at_its_principals_limit_only(tmp_path: Path) -> None:
    """300 rounds of one principal left waiting for approvals: past `limits.parked_turns` (16) they are refused,
    and another principal still gets its own round."""
    limit = 16
    script = [_writing(f"f{i}.txt") for i in range(limit + 1)]
    options = {"tools": {"write": True}}
    async with principals(tmp_path, script, mode="auto", client_options=ROUNDS, **options) as (alice, bob):
        flood = [await _round(alice, f"write f{i}.txt") for i in range(300)]
        others = await _round(bob, "write mine")
        listed = await alice.ok("session_list", {"limit": 200})
    parked = [r for r in flood if isinstance(r, types.InputRequiredResult)]
    refused = [r for r in flood if isinstance(r, types.CallToolResult)]
    assert len(parked) == limit and len(refused) == 300 - limit
    assert all(r.is_error and "limits.parked_turns" in r.content[0].text for r in refused)  # pyright: ignore[reportAttributeAccessIssue]
    assert isinstance(others, types.InputRequiredResult)  # bob was not locked out
    assert len(listed["sessions"]) == limit  # a refused round made no session
