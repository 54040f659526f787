"""One coalescing rule for every door: text goes at once, then waits for the interval or the next message."""

from __future__ import annotations

import pytest

from agent_server.doors.stream import EventStream
from agent_server.events import AgentEvent, StatusEvent, TokenEvent, ToolStartEvent, TurnEvent
from agent_server.types import ToolCall

pytestmark = pytest.mark.anyio

IDS = {"turn_id": "turn_1", "session_id": "ses_1", "trace_id": "trace_1"}


class _ShowsCalls:
    """Shows a door that draws only tool calls (as ACP does) and text."""

    def event(self, event: AgentEvent) -> str | None:
        return f"call {event.call.id}" if isinstance(event, ToolStartEvent) else None

    def text(self, token: TokenEvent) -> str:
        return f"text {token.delta}"

    def unfinished(self, call_id: str, status: str) -> str | None:
        return f"{call_id} {status}"


async def test_text_waits_for_a_message_the_door_sends_not_for_events_it_does_not_show() -> None:
    sent: list[str] = []

    async def send(message: str) -> None:
        sent.append(message)

    stream = EventStream(_ShowsCalls(), send, flush_interval=3600)
    await stream(TurnEvent(**IDS, prompt="p"))
    for delta in ["a", "b", "c"]:
        await stream(TokenEvent(**IDS, delta=delta))
    await stream(StatusEvent(**IDS, phase="sampling", message="not shown"))
    assert sent == ["text a"] and stream.buffered  # a status this door does not show sends nothing
    await stream(ToolStartEvent(**IDS, tool_round=1, call=ToolCall(id="c1", name="x")))
    await stream(ToolStartEvent(**IDS, tool_round=1, call=ToolCall(id="c2", name="x")))
    await stream.end("cancelled")
    assert sent == ["text a", "text bc", "call c1", "call c2", "c1 cancelled", "c2 cancelled"]
    assert stream.turn_id == "turn_1" and not stream.buffered
