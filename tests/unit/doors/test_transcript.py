"""A stored session as a client replays it: summary, messages, calls and their endings, command turns in place."""

from __future__ import annotations

from agent_server.doors.show import CallAnnounced, CallEnded, Said
from agent_server.doors.transcript import transcript
from agent_server.types import Message, SessionHistory, StoredMessage, TextPart, ToolCall, TurnRecord


def _turn(turn_id: str, prompt: str, started_at: str, command: str | None = None) -> TurnRecord:
    return TurnRecord(
        turn_id=turn_id,
        session_id="ses_1",
        trace_id="trace_1",
        status="completed",
        prompt=prompt,
        final_text=f"reply to {prompt}",
        command=command,
        started_at=started_at,
    )


def test_each_command_turn_stands_in_its_place_and_those_behind_the_summary_are_left_out() -> None:
    turns = [
        _turn("t1", "/tools", "2026-01-01T00:00:01", "tools"),  # before the compaction: behind the summary
        _turn("t2", "one", "2026-01-01T00:00:02"),
        _turn("t3", "/sessions", "2026-01-01T00:00:04", "sessions"),
        _turn("t4", "two", "2026-01-01T00:00:05"),
        _turn("t5", "/fork", "2026-01-01T00:00:06", "fork"),
    ]
    messages = [
        StoredMessage(seq=3, turn_id="t2", message=Message(role="assistant", content="answer one")),
        StoredMessage(seq=4, turn_id="t4", message=Message(role="user", content="two")),
    ]
    items = list(transcript(SessionHistory(summary="S", messages=messages), turns, since="2026-01-01T00:00:03"))
    assert items == [
        Said("agent", "Summary of the earlier conversation:\n\nS"),
        Said("agent", "answer one"),
        Said("user", "/sessions"),
        Said("agent", "reply to /sessions"),
        Said("user", "two"),
        Said("user", "/fork"),
        Said("agent", "reply to /fork"),
    ]


def test_a_failed_call_ends_failed_with_the_text_it_gave() -> None:
    call = ToolCall(id="c1", name="write_file", arguments={"path": "a"})
    messages = [
        Message(role="assistant", content="", tool_calls=[call]),
        Message(role="tool", content="Error: the user denied write_file", tool_call_id="c1", is_error=True),
    ]
    stored = [StoredMessage(seq=i, turn_id="t", message=m) for i, m in enumerate(messages, start=1)]
    assert list(transcript(SessionHistory(summary=None, messages=stored))) == [
        CallAnnounced(call),
        CallEnded("c1", True, [TextPart(text="the user denied write_file")]),
    ]
