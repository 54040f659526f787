"""`run_turn` on the client's model over 2026-07-28 multi round-trip requests (DESIGN 3.8): each model call
is an `llm-<n>` input request of an `InputRequiredResult`; the SDK client answers with its sampling callback
and retries, and the parked turn goes on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client import ClientRequestContext
from pydantic import ValidationError

from agent_server.llm.scripted import ScriptedLLM
from agent_server.server.app import create_server
from tests.interaction.harness import Progress, make_settings

pytestmark = pytest.mark.anyio

TOOLS_CAP = types.SamplingCapability(tools=types.SamplingToolsCapability())
FACT = "the sky is green"
STEPS: list[tuple[str, dict[str, Any]]] = [("list_dir", {"path": "."}), ("read_file", {"path": "fact.txt"})]
ANSWER = f"The file says: {FACT}"


class TwoToolRounds:
    """The client's model: lists the workspace, reads fact.txt, then answers with what it read."""

    def __init__(self) -> None:
        self.requests: list[types.CreateMessageRequestParams] = []

    async def __call__(self, ctx: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        self.requests.append(params)
        done = sum(isinstance(b, types.ToolResultContent) for m in params.messages for b in m.content_as_list)
        if done < len(STEPS):
            name, arguments = STEPS[done]
            use = types.ToolUseContent(type="tool_use", id=f"use-{done + 1}", name=name, input=arguments)
            return types.CreateMessageResultWithTools(
                role="assistant", model="client-llm", stop_reason="toolUse", content=[use]
            )
        return types.CreateMessageResult(
            role="assistant", model="client-llm", content=types.TextContent(type="text", text=ANSWER)
        )


SCRIPTED = [*({"tool_calls": [{"name": n, "arguments": a}]} for n, a in STEPS), {"content": ANSWER}]


def _settings(tmp_path: Path, **overrides: Any) -> Any:
    tmp_path.mkdir(exist_ok=True)
    settings = make_settings(tmp_path, **overrides)
    (settings.workspace / "fact.txt").write_text(FACT)
    return settings


def _shape(record: dict[str, Any]) -> tuple[Any, ...]:
    """What the model did and got, without ids and times."""
    calls = [(c["round"], c["name"], c["is_error"]) for c in record["tool_calls"]]
    rounds = [
        (
            [(c["name"], c["arguments"]) for c in r["requested_tools"]],
            [(t["name"], t["content"]) for t in r["tool_results"]],
        )
        for r in record["tool_rounds"]
    ]
    return record["status"], record["final_text"], calls, rounds, record["model_calls"]


async def test_two_tool_rounds_on_the_clients_model_match_the_same_turn_on_a_configured_model(
    tmp_path: Path,
) -> None:
    model = TwoToolRounds()
    progress = Progress()
    arguments = {"prompt": "what does fact.txt say?", "detail": "full"}
    with anyio.fail_after(20):
        lent = create_server(_settings(tmp_path / "lent"))
        async with Client(lent, sampling_callback=model, sampling_capabilities=TOOLS_CAP) as client:
            result = await client.call_tool("run_turn", arguments, progress_callback=progress)
            assert client.protocol_version == "2026-07-28"
        configured = create_server(_settings(tmp_path / "configured"), llm=ScriptedLLM(SCRIPTED))
        async with Client(configured) as client:
            reference = await client.call_tool("run_turn", arguments)
    record = result.structured_content
    assert record is not None and reference.structured_content is not None
    assert record["status"] == "completed" and record["final_text"] == ANSWER
    assert _shape(record) == _shape(reference.structured_content)
    assert len(model.requests) == 3 and all(r.tools for r in model.requests)  # the agent's tools went along
    assert {"list_dir", "read_file"} <= {t.name for t in model.requests[0].tools or []}
    text = "\n".join(progress.messages)
    assert "list_dir" in text and "read_file" in text  # streamed by the second and third rounds


async def test_a_client_that_never_retries_leaves_the_turn_cancelled_and_the_session_usable(tmp_path: Path) -> None:
    server = create_server(_settings(tmp_path, park_timeout_s=0.2))
    model = TwoToolRounds()
    with anyio.fail_after(20):
        async with Client(server, sampling_callback=model, sampling_capabilities=TOOLS_CAP) as client:
            first = await client.session.call_tool("run_turn", {"prompt": "hi"}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult) and first.input_requests is not None
            assert list(first.input_requests) == ["llm-1"]  # never answered
            listed = await client.call_tool("session_list", {})
            (session,) = (listed.structured_content or {})["sessions"]
            got = await client.call_tool("session_get", {"session_id": session["session_id"]})
            (turn,) = (got.structured_content or {})["turns"]
            waited = await client.call_tool("turn_wait", {"turn_id": turn["turn_id"], "timeout_s": 15})
            again = await client.call_tool("run_turn", {"prompt": "again", "session_id": session["session_id"]})
    record = waited.structured_content or {}
    assert record["status"] == "cancelled" and "park_timeout_s=0.2" in record["error"]["message"]
    assert (again.structured_content or {})["status"] == "completed"
    assert (again.structured_content or {})["final_text"] == ANSWER


async def test_a_tampered_request_state_is_refused(tmp_path: Path) -> None:
    server = create_server(_settings(tmp_path))
    arguments = {"prompt": "hi"}
    with anyio.fail_after(20):
        async with Client(server, sampling_callback=TwoToolRounds(), sampling_capabilities=TOOLS_CAP) as client:
            first = await client.session.call_tool("run_turn", arguments, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult) and first.request_state is not None
            state = first.request_state
            tampered = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
            answer = types.CreateMessageResult(
                role="assistant", model="m", content=types.TextContent(type="text", text="x")
            )
            with pytest.raises(MCPError) as caught:
                await client.session.call_tool(
                    "run_turn",
                    arguments,
                    input_responses={"llm-1": answer},
                    request_state=tampered,
                    allow_input_required=True,
                )
    assert caught.value.error.code == types.INVALID_PARAMS
    assert "requestState" in caught.value.error.message


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_client_without_sampling_gets_the_clear_error(tmp_path: Path, mode: str) -> None:
    server = create_server(_settings(tmp_path))
    with anyio.fail_after(10):
        async with Client(server, mode=mode) as client:
            result = await client.call_tool("run_turn", {"prompt": "hi"})
    assert result.is_error is True
    message = (result.structured_content or {})["error"]["message"]
    assert "sampling capability" in message and "--llm openai:MODEL" in message


@pytest.mark.parametrize("shared", [True, False])
async def test_replicas_sharing_request_state_keys_accept_each_others_state(tmp_path: Path, shared: bool) -> None:
    """A state sealed by one server passes another's check only when both have the same `request_state_keys`."""
    keys = ("k" * 32,) if shared else ()
    sealing = create_server(_settings(tmp_path, request_state_keys=keys))
    checking = create_server(_settings(tmp_path, request_state_keys=keys))
    arguments = {"prompt": "hi"}
    answer = types.CreateMessageResult(role="assistant", model="m", content=types.TextContent(type="text", text="x"))
    with anyio.fail_after(20):
        async with Client(sealing, sampling_callback=TwoToolRounds(), sampling_capabilities=TOOLS_CAP) as client:
            first = await client.session.call_tool("run_turn", arguments, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state is not None
        async with Client(checking, sampling_callback=TwoToolRounds(), sampling_capabilities=TOOLS_CAP) as client:
            try:
                retried = await client.session.call_tool(
                    "run_turn",
                    arguments,
                    input_responses={"llm-1": answer},
                    request_state=first.request_state,
                    allow_input_required=True,
                )
                refused_state = False
            except MCPError as exc:
                retried = exc
                refused_state = "requestState" in exc.error.message
    assert refused_state is (not shared), retried
    if shared:  # the state was good; the turn it names runs on the other server
        assert isinstance(retried, types.CallToolResult) and retried.is_error
        assert "no longer followed by this server" in retried.content[0].text  # pyright: ignore[reportAttributeAccessIssue]


def test_a_request_state_key_shorter_than_32_bytes_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="at least 32 bytes"):
        _settings(tmp_path, request_state_keys=["short"])
