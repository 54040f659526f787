"""The park on its own and under a background turn of the runtime: posting, answering, its bounds, and a
turn that waits past `park_timeout_s` ending `cancelled` with the reason."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from agent_server.approvals import ApprovalRequest, Decision, ElicitationAnswer, ElicitationRequest
from agent_server.presentation import Presentation
from agent_server.runtime import AgentRuntime
from agent_server.runtime.park import InputRequest, Park, ParkedApprovals, ParkExpired, ParkFull
from agent_server.settings import Settings
from agent_server.testing import ScriptedLLM
from agent_server.turn_options import TurnOptions

pytestmark = pytest.mark.anyio


def _approval(call_id: str = "call_1") -> ApprovalRequest:
    return ApprovalRequest(
        tool="write_file", arguments={}, shown=Presentation("{}"), source="builtin", session_id="ses_1", call_id=call_id
    )


async def _answer_when_posted(park: Park, key: str, value: object) -> None:
    await anyio.wait_all_tasks_blocked()  # the asker waits on its request by now
    assert park.answer(key, value)


async def test_an_answer_reaches_the_request_waiting_on_its_key_and_only_once() -> None:
    park = Park(timeout_s=60)
    channel = ParkedApprovals(park, "task")
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_answer_when_posted, park, "approve-call_1", Decision("allow_once"))
            decision = await channel.ask(_approval())
    assert decision == Decision("allow_once")
    assert park.pending() == []
    assert park.answer("approve-call_1", Decision("deny")) is False  # nobody waits any more: ignored
    assert park.answer("llm-9", object()) is False


async def test_an_answer_of_the_wrong_kind_is_a_denial_or_a_decline() -> None:
    park = Park(timeout_s=60)
    channel = ParkedApprovals(park, "input_required")
    form = ElicitationRequest(server="s", message="m", requested_schema={})
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_answer_when_posted, park, "approve-call_1", "yes please")
            decision = await channel.ask(_approval())
        async with anyio.create_task_group() as tg:
            tg.start_soon(_answer_when_posted, park, "elicit-1", {"action": "accept"})
            answer = await channel.elicit(form)
    assert decision.choice == "deny"
    assert answer == ElicitationAnswer("decline")


async def test_the_number_of_pending_requests_and_their_keys_are_bounded() -> None:
    park = Park(timeout_s=60, max_pending=2)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for key in ("a", "b"):
                tg.start_soon(park.ask, InputRequest(key, "model", None))
            await anyio.wait_all_tasks_blocked()
            with pytest.raises(ParkFull):
                await park.ask(InputRequest("c", "model", None))
            assert [r.key for r in park.pending()] == ["a", "b"]
            park.answer("a", 1)
            await anyio.wait_all_tasks_blocked()
            with pytest.raises(ParkFull):  # a key already waiting is refused too
                await park.ask(InputRequest("b", "model", None))
            park.answer("b", 2)


async def test_a_park_nobody_follows_raises_once_its_timeout_passes() -> None:
    park = Park(timeout_s=0.05)
    with anyio.fail_after(5), pytest.raises(ParkExpired, match="park_timeout_s=0.05"):
        await park.ask(InputRequest("llm-1", "model", None))
    assert park.expired is not None and park.pending() == []


def _settings(tmp_path: Path, **overrides: object) -> Settings:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return Settings.model_validate(
        {"workspace": workspace, "state_dir": tmp_path / "state", "tools": {"write": True}, **overrides}
    )


WRITE = {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}]}


async def test_a_background_turn_waits_awaiting_input_and_goes_on_with_the_answer(tmp_path: Path) -> None:
    llm = ScriptedLLM([WRITE, {"expect_contains": "a.txt", "content": "written"}])
    async with AgentRuntime(_settings(tmp_path), llm=llm) as runtime:
        park = runtime.new_park()
        with anyio.fail_after(10):
            handle = await runtime.start_turn(
                "write", park=park, options=TurnOptions(approvals=ParkedApprovals(park, "task"))
            )
            assert await handle.wait_for_input()
            assert handle.record.status == "awaiting_input"
            (request,) = park.pending()
            assert request.key.startswith("approve-") and request.kind == "approval"
            assert isinstance(request.payload, ApprovalRequest) and request.payload.tool == "write_file"
            (listed,), _ = await runtime.list_turns(handle.session_id)
            assert listed.status == "awaiting_input"  # what session_get shows
            assert park.answer(request.key, Decision("allow_once"))
            record = await handle.wait()
    assert record.status == "completed" and record.final_text == "written"
    assert [(a.channel, a.decision) for a in record.approvals] == [("task", "allow_once")]
    assert (tmp_path / "ws" / "a.txt").read_text() == "hi"


async def test_a_turn_left_waiting_past_park_timeout_s_ends_cancelled_saying_so(tmp_path: Path) -> None:
    settings = _settings(tmp_path, park_timeout_s=0.1, approvals={"timeout_s": 3600})
    async with AgentRuntime(settings, llm=ScriptedLLM([WRITE])) as runtime:
        park = runtime.new_park()
        with anyio.fail_after(10):
            handle = await runtime.start_turn(
                "write", park=park, options=TurnOptions(approvals=ParkedApprovals(park, "task"))
            )
            record = await handle.wait()
        stored = await runtime.get_turn(handle.session_id, handle.turn_id)
    assert record.status == "cancelled" and record.error is not None
    assert "park_timeout_s=0.1" in record.error.message and "did not answer" in record.error.message
    assert stored == record
    assert not (tmp_path / "ws" / "a.txt").exists()
