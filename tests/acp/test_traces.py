"""ACP: a `session/prompt` whose `_meta` carries a `traceparent` continues the caller's trace (README "Traces").

In process, over the front door's own agent object: the ACP library hands a request's `_meta` entries to the
handler as keyword arguments, which is what `prompt` is given here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from acp.schema import TextContentBlock

from agent_server.acp.agent import AcpAgent
from agent_server.llm.scripted import ScriptedLLM
from agent_server.runtime import AgentRuntime
from agent_server.settings import Settings
from tests.acp.helpers import RecordingClient
from tests.span_capture import Spans, capture, hex_ids

pytestmark = [pytest.mark.fast, pytest.mark.anyio]

PARENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT_SPAN = "b7ad6b7169203331"


@pytest.fixture
def spans() -> Iterator[Spans]:
    with capture() as captured:
        yield captured


async def _prompt(tmp_path: Path, **meta: str) -> str:
    settings = Settings(workspace=tmp_path, state_dir=tmp_path / "state", tracing=True)
    llm = ScriptedLLM([{"tool_calls": [{"name": "list_dir", "arguments": {}}]}, {"content": "seen"}])
    with anyio.fail_after(10):
        async with AgentRuntime(settings, llm=llm) as runtime, anyio.create_task_group() as tg:
            agent = AcpAgent(runtime, tg)
            agent.on_connect(RecordingClient())  # pyright: ignore[reportArgumentType]
            session = await agent.new_session(cwd=str(tmp_path), mcp_servers=[])
            response = await agent.prompt([TextContentBlock(type="text", text="look")], session.session_id, **meta)
            assert response.stop_reason == "end_turn"
            agent.close_all()
    return session.session_id


async def test_a_prompt_with_a_traceparent_continues_the_callers_trace(tmp_path: Path, spans: Spans) -> None:
    session_id = await _prompt(tmp_path, traceparent=f"00-{PARENT_TRACE}-{PARENT_SPAN}-01", tracestate="k=v")
    turn = spans.one("invoke_agent")
    assert hex_ids(turn)[0] == PARENT_TRACE
    assert turn.parent is not None and f"{turn.parent.span_id:016x}" == PARENT_SPAN and turn.parent.is_remote
    assert turn.context is not None and turn.context.trace_state.to_header() == "k=v"
    assert [s.name for s in spans.children(turn)] == ["chat", "execute_tool list_dir", "chat"]
    assert dict(turn.attributes or {})["gen_ai.conversation.id"] == session_id


async def test_a_prompt_without_one_starts_a_trace_of_its_own(tmp_path: Path, spans: Spans) -> None:
    await _prompt(tmp_path, traceparent="00-not-a-valid-header-01")
    turn = spans.one("invoke_agent")
    assert turn.parent is None and hex_ids(turn)[0] != PARENT_TRACE
