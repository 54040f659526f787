"""`TurnState` keeps the turn's record itself: copies handed out never change, and the first ending wins."""

from __future__ import annotations

from agent_server.agent.context import TurnRequest
from agent_server.agent.turn_state import TurnState
from agent_server.turn_options import TurnOptions
from agent_server.types import AssistantTurn, ErrorInfo, Message, Usage


def test_a_record_handed_out_never_changes_and_the_first_ending_wins() -> None:
    state = TurnState.begin(
        TurnRequest(prompt="hi", session_id="s1", trace_id="tr", max_tool_passes=3, options=TurnOptions(model="m"))
    )
    begun = state.record
    assert (begun.status, begun.session_id, begun.trace_id, begun.prompt, begun.model) == (
        "running",
        "s1",
        "tr",
        "hi",
        "m",
    )
    state.add_assistant_turn(AssistantTurn(phase="initial", text="a"), Usage(prompt_tokens=2, completion_tokens=1))
    state.add_assistant_turn(AssistantTurn(phase="followup_1", text="b"), Usage(prompt_tokens=3))
    state.transition("sampling", "finalizing", "model_failed")
    state.commit([Message(role="user", content="hi")])
    state.finish("failed", error=ErrorInfo(type="model_error", message="down"))
    state.finish("completed", final_text="too late")

    assert (begun.status, begun.transitions, begun.assistant_turns, begun.finished_at) == ("running", [], [], None)
    record = state.record
    assert record.status == "failed" and record.final_text == ""
    assert record.error == ErrorInfo(type="model_error", message="down")
    assert [t.reason for t in record.transitions] == ["model_failed"]
    assert [a.text for a in record.assistant_turns] == ["a", "b"]
    assert (record.usage.prompt_tokens, record.usage.completion_tokens) == (5, 1)
    assert record.finished_at is not None and record.turn_id == begun.turn_id
    assert state.ids() == {"turn_id": begun.turn_id, "session_id": "s1", "trace_id": "tr"}
    assert state.committed == [Message(role="user", content="hi")]
