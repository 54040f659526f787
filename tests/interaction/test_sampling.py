"""`--llm sampling`: the client's own model through sampling/createMessage, and its clear refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client import ClientRequestContext

from agent_server.errors import ConfigError
from agent_server.llm.scripted import ScriptedLLM
from agent_server.runtime import fixed_llm
from agent_server.server.app import create_server
from agent_server.tools.builtin import SPECS as READ_TOOLS
from tests.interaction.harness import make_settings

pytestmark = pytest.mark.anyio

TOOLS_CAP = types.SamplingCapability(tools=types.SamplingToolsCapability())


class FakeClientModel:
    """The client's model: asks for read_file once, then answers with what the tool returned."""

    def __init__(self) -> None:
        self.requests: list[types.CreateMessageRequestParams] = []

    async def __call__(self, ctx: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        self.requests.append(params)
        last = params.messages[-1].content_as_list
        results = [b for b in last if isinstance(b, types.ToolResultContent)]
        if params.tools and not results:
            use = types.ToolUseContent(type="tool_use", id="use-1", name="read_file", input={"path": "fact.txt"})
            return types.CreateMessageResultWithTools(
                role="assistant", model="client-llm", stop_reason="toolUse", content=[use]
            )
        text = results[0].content[0].text if results else "no tools for me"  # type: ignore[union-attr]
        answer = types.TextContent(type="text", text=f"The file says: {text}")
        return types.CreateMessageResultWithTools(
            role="assistant", model="client-llm", stop_reason="endTurn", content=[answer]
        )


async def test_client_model_runs_a_tool_round_in_the_handshake_era(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, llm="sampling")
    (settings.workspace / "fact.txt").write_text("water is wet")
    model = FakeClientModel()
    server = create_server(settings)
    with anyio.fail_after(10):
        async with Client(server, mode="legacy", sampling_callback=model, sampling_capabilities=TOOLS_CAP) as client:
            result = await client.call_tool("run_turn", {"prompt": "What does fact.txt say?", "detail": "full"})
    record = result.structured_content
    assert record["status"] == "completed", record
    assert record["final_text"] == "The file says: water is wet"
    assert record["tool_rounds"][0]["requested_tools"][0]["name"] == "read_file"
    assert {t.name for t in model.requests[0].tools or []} == set(READ_TOOLS)
    assert model.requests[0].system_prompt


async def test_client_model_without_the_tools_capability_samples_without_tools(tmp_path: Path) -> None:
    model = FakeClientModel()
    server = create_server(make_settings(tmp_path, llm="sampling"))
    with anyio.fail_after(10):
        async with Client(server, mode="legacy", sampling_callback=model) as client:
            result = await client.call_tool("run_turn", {"prompt": "hi"})
    assert result.structured_content["final_text"] == "The file says: no tools for me"
    assert model.requests[0].tools is None


async def test_sampling_without_the_capability_is_refused_clearly(tmp_path: Path) -> None:
    server = create_server(make_settings(tmp_path))
    with anyio.fail_after(10):
        async with Client(server, mode="legacy") as client:
            result = await client.call_tool("run_turn", {"prompt": "hi"})
    assert result.is_error is True
    assert "sampling capability" in result.structured_content["error"]["message"]


def test_default_provider_follows_the_environment(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    assert fixed_llm(settings, {}) is None  # the client's model, where the connection allows
    with pytest.raises(ConfigError, match="AGENT_SERVER_MODEL"):
        fixed_llm(settings, {"OPENAI_API_KEY": "sk-test"})
    script = tmp_path / "s.json"
    script.write_text('{"responses": []}')
    assert isinstance(fixed_llm(make_settings(tmp_path, llm=f"script:{script}"), {}), ScriptedLLM)
    with pytest.raises(ConfigError, match="needs a model"):
        fixed_llm(make_settings(tmp_path, llm="openai"), {})
