"""One tool round: calls with unusable arguments never reach a toolset; results keep the call order."""

from __future__ import annotations

import pytest

from agent_server.agent.tool_calls import run_tool_round
from agent_server.events import AgentEvent, EventIds
from agent_server.tools.base import ProgressCallback
from agent_server.tools.registry import ToolRegistry
from agent_server.types import TextPart, ToolCall, ToolResult, ToolSpec

pytestmark = pytest.mark.anyio


class Recording:
    """Offers `echo`; records every call it is given."""

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []

    async def list_tools(self) -> list[ToolSpec]:
        return [ToolSpec(name="echo")]

    async def call_tool(self, call: ToolCall, *, on_progress: ProgressCallback | None = None) -> ToolResult:
        self.calls.append(call)
        return ToolResult(call_id=call.id, name=call.name, content=[TextPart(text="echoed")])


async def test_a_call_with_an_arguments_error_is_answered_without_reaching_the_toolset() -> None:
    toolset = Recording()
    events: list[AgentEvent] = []

    async def emit(event: AgentEvent) -> None:
        events.append(event)

    bad = ToolCall(id="c1", name="echo", arguments_error="not valid JSON")
    good = ToolCall(id="c2", name="echo", arguments={"text": "hi"})
    ids = EventIds(session_id="s", turn_id="t", trace_id="x")
    results = await run_tool_round(ToolRegistry([toolset]), [bad, good], tool_round=1, emit=emit, ids=ids)
    assert toolset.calls == [good]
    assert [(r.call_id, r.is_error, r.text()) for r in results] == [
        ("c1", True, "invalid arguments for echo: not valid JSON; the tool was not run"),
        ("c2", False, "echoed"),
    ]
    assert results[1].duration_s > 0  # timed by the registry
    kinds = sorted(event.type for event in events)
    assert kinds == ["tool_result", "tool_result", "tool_running", "tool_start", "tool_start"]  # c1 never ran
