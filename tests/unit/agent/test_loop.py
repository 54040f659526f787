"""The turn's state machine as its record shows it: every way a turn ends, with the exact transitions."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_server.agent.context import DISCARD, AgentDeps, TurnRequest
from agent_server.agent.turns import run_turn
from agent_server.events import AgentEvent, EventSink, StatusEvent
from agent_server.llm.base import ModelRequest, ModelResponse
from agent_server.llm.scripted import ScriptedLLM
from agent_server.settings import Settings
from agent_server.store.base import SessionStore
from agent_server.store.memory import MemoryStore
from agent_server.tools.registry import ToolRegistry
from agent_server.types import TurnRecord

pytestmark = pytest.mark.anyio

TOOL_CALL: dict[str, Any] = {"content": "", "tool_calls": [{"name": "nothing_here", "arguments": {}}]}
TOOL_ROUND = [
    ("sampling", "executing_tools", "assistant_requested_tools"),
    ("executing_tools", "post_tool_decision", "tool_round_completed"),
    ("post_tool_decision", "sampling", "runtime_continuation_after_tools"),
]


class Turn:
    """One session with a scripted model and no tools, and the records of the turns run on it."""

    def __init__(self, tmp_path: Path, script: list[dict[str, Any]], store: SessionStore | None = None) -> None:
        self.store = store or MemoryStore()
        self.deps = AgentDeps(
            settings=Settings(workspace=tmp_path, state_dir=tmp_path / "state"),
            store=self.store,
            llm=ScriptedLLM(script),
            tools=ToolRegistry([]),
        )

    async def run(
        self, *, max_tool_passes: int = 5, deadline: float | None = None, emit: EventSink = DISCARD
    ) -> TurnRecord:
        session = await self.store.create_session(title="s", metadata={})
        self.session_id = session.session_id
        request = TurnRequest(
            prompt="hi",
            session_id=session.session_id,
            trace_id="tr",
            max_tool_passes=max_tool_passes,
            deadline=deadline,
        )
        with anyio.fail_after(5):
            return await run_turn(self.deps, request, emit)

    async def stored(self) -> TurnRecord:
        (summary,), _ = await self.store.list_turns(self.session_id, cursor=None, limit=10)
        return await self.store.get_turn(self.session_id, summary.turn_id)


def transitions(record: TurnRecord) -> list[tuple[str, str, str]]:
    return [(t.from_, t.to, t.reason) for t in record.transitions]


async def test_an_answer_without_tools_completes(tmp_path: Path) -> None:
    record = await Turn(tmp_path, [{"content": "hello"}]).run()
    assert (record.status, record.error, record.final_text) == ("completed", None, "hello")
    assert transitions(record) == [("sampling", "finalizing", "assistant_finished_without_tools")]


async def test_a_tool_round_goes_back_to_sampling(tmp_path: Path) -> None:
    record = await Turn(tmp_path, [TOOL_CALL, {"content": "done"}]).run()
    assert (record.status, record.final_text) == ("completed", "done")
    assert transitions(record) == [*TOOL_ROUND, ("sampling", "finalizing", "assistant_finished_without_tools")]
    assert [r.tool_round for r in record.tool_rounds] == [1]


async def test_asking_for_tools_with_no_passes_left_halts(tmp_path: Path) -> None:
    record = await Turn(tmp_path, [TOOL_CALL, TOOL_CALL]).run(max_tool_passes=1)
    assert record.status == "halted"
    assert record.error is not None and record.error.type == "max_tool_passes"
    assert "max_tool_passes=1" in record.error.message
    assert transitions(record) == [
        *TOOL_ROUND,
        ("sampling", "executing_tools", "assistant_requested_tools"),
        ("executing_tools", "finalizing", "max_tool_passes_reached"),
    ]
    assert len(record.tool_rounds) == 1 and len(record.assistant_turns) == 2


async def test_a_model_error_fails_the_turn(tmp_path: Path) -> None:
    record = await Turn(tmp_path, [{"error": {"message": "provider down"}}]).run()
    assert record.status == "failed"
    assert record.error is not None and (record.error.type, record.error.message) == ("model_error", "provider down")
    assert transitions(record) == [("sampling", "finalizing", "model_failed")]


async def test_a_deadline_already_passed_times_the_turn_out(tmp_path: Path) -> None:
    turn = Turn(tmp_path, [{"content": "too late"}])
    record = await turn.run(deadline=anyio.current_time())
    assert record.status == "timed_out"
    assert record.error is not None and record.error.type == "timed_out"
    assert "its deadline" in record.error.message
    assert transitions(record) == [("running", "finalizing", "timeout")]
    assert await turn.stored() == record


async def test_a_cancelled_turn_is_recorded_as_cancelled(tmp_path: Path) -> None:
    turn = Turn(tmp_path, [{"delay_s": 60, "content": "never"}])
    with anyio.CancelScope() as scope:

        async def cancel_when_sampling(event: AgentEvent) -> None:
            if isinstance(event, StatusEvent) and event.phase == "sampling":
                scope.cancel()

        await turn.run(emit=cancel_when_sampling)
    assert scope.cancelled_caught
    record = await turn.stored()
    assert record.status == "cancelled"
    assert record.error is not None and record.error.type == "cancelled"
    assert record.transitions == [] and record.finished_at is not None


class BrokenModel(ScriptedLLM):
    async def complete(self, request: ModelRequest, **_: Any) -> ModelResponse:
        raise RuntimeError("a bug below the loop")


async def test_an_unexpected_exception_is_recorded_as_internal_error_and_raised(tmp_path: Path) -> None:
    turn = Turn(tmp_path, [])
    turn.deps = dataclasses.replace(turn.deps, llm=BrokenModel([]))
    with pytest.raises(RuntimeError, match="a bug below the loop"):
        await turn.run()
    record = await turn.stored()
    assert record.status == "failed"
    assert record.error is not None and record.error.type == "internal_error"
    assert record.error.message == "RuntimeError: a bug below the loop"
