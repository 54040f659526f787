"""What the page shows of a turn (`agent_server.view.timeline`): steps in order, running calls, hostile text escaped
and capped."""

from __future__ import annotations

from agent_server.types import (
    ApprovalRecord,
    AssistantTurn,
    TextPart,
    ToolCall,
    ToolResult,
    ToolRound,
    TurnRecord,
    Usage,
)
from agent_server.view.timeline import TEXT_CAP, shown, timeline


def record(**fields: object) -> TurnRecord:
    return TurnRecord.model_validate(
        {
            "turn_id": "turn_1",
            "session_id": "ses_1",
            "trace_id": "t",
            "status": "running",
            "prompt": "p",
            "started_at": "2026-01-01T00:00:00.000+00:00",
            **fields,
        }
    )


def test_model_calls_and_tool_rounds_alternate_and_a_call_without_result_is_running() -> None:
    read = ToolCall(id="c1", name="read_file", arguments={"path": "a"})
    write = ToolCall(id="c2", name="write_file", arguments={"path": "b", "content": "x"})
    turn = record(
        assistant_turns=[
            AssistantTurn(phase="initial", text="", tool_calls=[read], duration_s=1.0, usage=Usage(prompt_tokens=5)),
            AssistantTurn(phase="followup_1", text="", tool_calls=[write], duration_s=2.0),
        ],
        tool_rounds=[
            ToolRound(
                tool_round=1,
                requested_tools=[read],
                tool_results=[
                    ToolResult(call_id="c1", name="read_file", content=[TextPart(text="hi")], duration_s=0.5)
                ],
            )
        ],
        approvals=[ApprovalRecord(call_id="c2", tool="write_file", channel="web", decision="allow_once", latency_s=3)],
    )
    steps = timeline(turn)["steps"]
    assert [s["kind"] for s in steps] == ["model", "tools", "model", "tools"]
    assert steps[0]["duration_s"] == 1.0 and steps[0]["usage"] == {"prompt_tokens": 5}
    assert steps[1]["calls"][0] | {"arguments": None} == {
        "call_id": "c1",
        "name": "read_file",
        "arguments": None,
        "arguments_error": None,
        "status": "ok",
        "duration_s": 0.5,
        "result": {"text": "hi", "hidden": 0},
        "approval": None,
    }
    waiting = steps[3]["calls"][0]
    assert waiting["status"] == "running" and waiting["result"] is None
    assert waiting["approval"]["channel"] == "web"


def test_hostile_text_is_escaped_and_long_text_is_cut_saying_how_much() -> None:
    turn = record(final_text="ok\u202eevil\x1b[2J<script>", prompt="x" * (TEXT_CAP + 10))
    data = timeline(turn)
    assert data["final_text"] == {"text": "ok\\u202eevil\\x1b[2J<script>", "hidden": 0}
    assert data["prompt"]["hidden"] == 10 and len(data["prompt"]["text"]) == TEXT_CAP
    assert shown("a\u200bb") == {"text": "a\\u200bb", "hidden": 0}
