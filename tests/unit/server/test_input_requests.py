"""A parked turn's input requests on the wire and its client's answers back, including bad answers: each
becomes a refusal the turn can go on with, never a wait."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest

from agent_server.approvals import ApprovalRequest, Decision
from agent_server.errors import ModelError
from agent_server.presentation import Presentation
from agent_server.runtime import InputRequest, Park
from agent_server.server.input_requests import deliver, wire_requests

pytestmark = pytest.mark.anyio

APPROVAL = ApprovalRequest(
    tool="write_file",
    arguments={"path": "a"},
    shown=Presentation("path: a"),
    source="builtin",
    session_id="s",
    call_id="c1",
)
SAMPLING = types.CreateMessageRequestParams(
    messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text="hi"))], max_tokens=10
)


async def _asked(responses: dict[str, object]) -> dict[str, object]:
    """Post an approval and a model call, deliver `responses`, and return what each asker got."""
    park = Park(timeout_s=60)
    got: dict[str, object] = {}

    async def ask(request: InputRequest) -> None:
        got[request.key] = await park.ask(request)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, InputRequest("approve-c1", "approval", APPROVAL))
            tg.start_soon(ask, InputRequest("llm-1", "model", SAMPLING))
            await anyio.wait_all_tasks_blocked()
            wire = wire_requests(park)
            assert isinstance(wire["approve-c1"], types.ElicitRequest)
            assert isinstance(wire["llm-1"], types.CreateMessageRequest) and wire["llm-1"].params == SAMPLING
            assert deliver(park, {**responses, "nobody-waits": {}}) == 2
    return got


async def test_good_answers_become_a_decision_and_a_sampling_result() -> None:
    got = await _asked(
        {
            "approve-c1": {"action": "accept", "content": {"decision": "allow_session"}},
            "llm-1": {"role": "assistant", "model": "m", "content": {"type": "text", "text": "hello"}},
        }
    )
    assert got["approve-c1"] == Decision("allow_session")
    assert isinstance(got["llm-1"], types.CreateMessageResultWithTools) and got["llm-1"].model == "m"


async def test_bad_answers_become_a_denial_and_a_model_error() -> None:
    got = await _asked({"approve-c1": {"action": "maybe"}, "llm-1": {"text": "not a result"}})
    denial = got["approve-c1"]
    assert isinstance(denial, Decision) and denial.choice == "deny" and denial.reason
    assert isinstance(got["llm-1"], ModelError) and "llm-1" in got["llm-1"].message
