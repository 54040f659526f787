"""A turn record's views come from one field list: every field of the record reaches every door."""

from __future__ import annotations

from agent_server.doors.records import FULL_ONLY, TurnView, turn_json, turn_view
from agent_server.types import (
    ApprovalRecord,
    AssistantTurn,
    TextPart,
    ToolCall,
    ToolResult,
    ToolRound,
    TurnRecord,
)

DERIVED = {"model_calls", "tool_calls", "approval_count"}


def _record() -> TurnRecord:
    call = ToolCall(id="c1", name="read_file", arguments={"path": "x"})
    failed = ToolResult(call_id="c1", name="read_file", is_error=True, content=[TextPart(text="no such\nfile")])
    return TurnRecord(
        turn_id="turn_1",
        session_id="ses_1",
        trace_id="trace_1",
        status="completed",
        prompt="Read x",
        final_text="It is missing.",
        assistant_turns=[
            AssistantTurn(phase="sampling", text="", tool_calls=[call]),
            AssistantTurn(phase="x", text=""),
        ],
        tool_rounds=[ToolRound(tool_round=1, requested_tools=[call], tool_results=[failed])],
        approvals=[ApprovalRecord(call_id="c1", tool="read_file", channel="acp", decision="allow_once")],
        started_at="2026-01-01T00:00:00",
        command=None,
    )


def test_the_view_declares_every_field_of_the_record_and_only_the_derived_ones_besides() -> None:
    assert set(TurnView.model_fields) == set(TurnRecord.model_fields) | DERIVED
    assert set(FULL_ONLY) < set(TurnRecord.model_fields), "FULL_ONLY names fields of the record"


def test_the_summary_is_the_record_without_the_full_only_fields_plus_the_derived_ones() -> None:
    record = _record()
    summary = turn_json(record)
    expected = set(TurnRecord.model_fields) - set(FULL_ONLY) | DERIVED
    assert set(summary) == expected
    assert summary["tool_calls"] == [
        {"round": 1, "name": "read_file", "is_error": True, "duration_s": 0.0, "error": "no such file"}
    ]
    assert (summary["model_calls"], summary["approval_count"]) == (2, 1)
    full = turn_json(record, "full")
    assert set(full) == set(TurnRecord.model_fields) | DERIVED
    assert full["approvals"][0]["channel"] == "acp" and full["prompt"] == "Read x"


def test_every_record_field_has_the_records_value_in_the_view() -> None:
    record = _record()
    view = turn_view(record, "full")
    for name in TurnRecord.model_fields:
        assert getattr(view, name) == getattr(record, name), name
