"""ACP: a prompt whose `_meta.agent_server.options` carries an `output_schema` answers with the JSON value as the
agent's message, once, even when the model had to correct its first answer.

In process, over the front door's own agent object (as `test_traces.py`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
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
