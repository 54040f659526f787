"""ACP: a prompt whose `_meta.agent_server.options` carries an `output_schema` answers with the JSON value as the
agent's message, once, even when the model had to correct its first answer; named agents are session modes.

In process, over the front door's own agent object (as `test_traces.py`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError
from acp.schema import TextContentBlock

from agent_server.acp.agent import AcpAgent
from agent_server.llm.scripted import ScriptedLLM
from agent_server.runtime import AgentRuntime
from agent_server.settings import Settings
from tests.acp.helpers import RecordingClient

pytestmark = [pytest.mark.fast, pytest.mark.anyio]

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


async def test_the_structured_answer_is_the_agents_one_message(tmp_path: Path) -> None:
    settings = Settings(workspace=tmp_path, state_dir=tmp_path / "state")
    llm = ScriptedLLM([{"content": '{"n": "three"}'}, {"expect_contains": "does not match", "content": '{"n": 3}'}])
    client = RecordingClient()
    meta: dict[str, Any] = {"agent_server": {"options": {"output_schema": SCHEMA}}}
    with anyio.fail_after(10):
        async with AgentRuntime(settings, llm=llm) as runtime, anyio.create_task_group() as tg:
            agent = AcpAgent(runtime, tg)
            agent.on_connect(client)  # pyright: ignore[reportArgumentType]
            session = await agent.new_session(cwd=str(tmp_path), mcp_servers=[])
            response = await agent.prompt([TextContentBlock(type="text", text="count")], session.session_id, **meta)
            agent.close_all()
    assert response.stop_reason == "end_turn"
    assert json.loads(client.texts(session.session_id)) == {"n": 3}
    assert (response.field_meta or {})["agent_server"]["turn"]["structured_output"] == {"n": 3}


REVIEWER = (Path(__file__).parent.parent / "interaction" / "data" / "reviewer.md").read_text(encoding="utf-8")


async def test_named_agents_are_session_modes(tmp_path: Path) -> None:
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "reviewer.md").write_text(REVIEWER, encoding="utf-8")
    settings = Settings(
        workspace=tmp_path,
        state_dir=tmp_path / "state",
        agents={"counter": {"description": "Counts things.", "tools": ["list_dir"], "output_schema": SCHEMA}},
    )
    llm = ScriptedLLM([{"content": "Reviewed."}, {"content": '{"n": 2}'}, {"content": "Plain."}])
    client = RecordingClient()
    block = [TextContentBlock(type="text", text="go")]
    with anyio.fail_after(10):
        async with AgentRuntime(settings, llm=llm) as runtime, anyio.create_task_group() as tg:
            agent = AcpAgent(runtime, tg)
            agent.on_connect(client)  # pyright: ignore[reportArgumentType]
            session = await agent.new_session(cwd=str(tmp_path), mcp_servers=[])
            sid = session.session_id
            with pytest.raises(RequestError, match="no session mode 'nobody'"):
                await agent.set_session_mode(session_id=sid, mode_id="nobody")
            await agent.set_session_mode(session_id=sid, mode_id="reviewer")
            reviewed = await agent.prompt(block, sid)
            await agent.set_session_mode(session_id=sid, mode_id="counter")
            counted = await agent.prompt(block, sid)
            await agent.set_session_mode(session_id=sid, mode_id="default")
            plain = await agent.prompt(block, sid)
            agent.close_all()
    modes = session.modes
    assert modes is not None and modes.current_mode_id == "default"
    assert [m.id for m in modes.available_modes] == ["default", "counter", "reviewer"]
    descriptions = {m.id: m.description or "" for m in modes.available_modes}
    assert descriptions["counter"] == "Counts things."
    assert descriptions["reviewer"].startswith("Expert code review specialist.")
    first, second, third = llm.calls
    assert "You are a senior code reviewer" in first.messages[0].text()
    assert sorted(spec.name for spec in first.tools) == ["list_dir", "read_file", "search_text"]
    assert [spec.name for spec in second.tools] == ["list_dir"]
    assert "You are a senior code reviewer" not in third.messages[0].text() and len(third.tools) > 1
    turns = [(r.field_meta or {})["agent_server"]["turn"] for r in (reviewed, counted, plain)]
    assert [t["agent"] for t in turns] == ["reviewer", "counter", None]
    assert turns[1]["structured_output"] == {"n": 2}
    assert '{"n": 2}' in client.texts(sid)


async def test_a_loaded_session_opens_in_the_mode_of_its_agent(tmp_path: Path) -> None:
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "reviewer.md").write_text(REVIEWER, encoding="utf-8")
    settings = Settings(workspace=tmp_path, state_dir=tmp_path / "state")
    llm = ScriptedLLM([{"content": "Reviewed again."}])
    with anyio.fail_after(10):
        async with AgentRuntime(settings, llm=llm) as runtime, anyio.create_task_group() as tg:
            made = await runtime.create_session(metadata={"agent": "reviewer"}, connection=None)
            agent = AcpAgent(runtime, tg)
            agent.on_connect(RecordingClient())  # pyright: ignore[reportArgumentType]
            loaded = await agent.load_session(cwd=str(tmp_path), session_id=made.session_id, mcp_servers=[])
            response = await agent.prompt([TextContentBlock(type="text", text="again")], made.session_id)
            agent.close_all()
    assert loaded.modes is not None and loaded.modes.current_mode_id == "reviewer"
    assert (response.field_meta or {})["agent_server"]["turn"]["agent"] == "reviewer"
    assert "You are a senior code reviewer" in llm.calls[0].messages[0].text()
