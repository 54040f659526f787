"""A 2026-07-28 MCP task whose turn needs its client: `input_required` with `inputRequests` in `tasks/get`,
answered by `tasks/update` (through the reference helper `clients/python/mcp_tasks.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client import ClientRequestContext

from agent_server.llm.scripted import ScriptedLLM
from agent_server.server.app import create_server
from tests.interaction.harness import make_settings
from tests.interaction.test_tasks import mcp_tasks

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's suggested poll interval (1 s) would only make these tests slow."""
    monkeypatch.setattr("agent_server.server.tasks.modern.POLL_INTERVAL_MS", 20)


WRITE = {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}]}
ALLOW = {"action": "accept", "content": {"decision": "allow_once"}}


class Answers:
    """The client's side of `input_required`: records what it was asked and answers with `response`."""

    def __init__(self, response: dict[str, Any]) -> None:
        self.response = response
        self.asked: dict[str, dict[str, Any]] = {}

    async def __call__(self, key: str, request: dict[str, Any]) -> dict[str, Any]:
        self.asked[key] = request
        return self.response


async def declare_elicitation(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult | types.ErrorData:
    """Never called on a task's path: passed so that the client declares the elicitation capability."""
    raise AssertionError("the server sent elicitation/create on 2026-07-28")


async def _run(
    tmp_path: Path, script: list[dict[str, Any]], answers: Answers | None, *, elicitation: bool = True, **settings: Any
) -> dict[str, Any]:
    server = create_server(make_settings(tmp_path, tools={"write": True}, **settings), llm=ScriptedLLM(script))
    extension = mcp_tasks().TasksExtension(on_input=answers, on_task=lambda _id: None)
    callback = declare_elicitation if elicitation else None
    with anyio.fail_after(20):
        async with Client(server, extensions=[extension], elicitation_callback=callback) as client:
            assert client.protocol_version == "2026-07-28"
            result = await client.call_tool("run_turn", {"prompt": "write it", "detail": "full"})
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    return {"text": text.text, **(result.structured_content or {})}


def _approvals(record: dict[str, Any]) -> list[tuple[str, str]]:
    return [(a["channel"], a["decision"]) for a in record["approvals"]]


async def test_an_approval_allowed_through_tasks_update_lets_the_tool_run(tmp_path: Path) -> None:
    answers = Answers(ALLOW)
    script = [WRITE, {"expect_contains": "a.txt", "content": "written"}]
    record = await _run(tmp_path, script, answers)
    assert record["status"] == "completed" and record["final_text"] == "written"
    assert (tmp_path / "ws" / "a.txt").read_text() == "hi"
    assert _approvals(record) == [("task", "allow_once")]
    ((key, request),) = answers.asked.items()
    assert key.startswith("approve-") and request["method"] == "elicitation/create"
    assert "write_file" in request["params"]["message"]
    schema = request["params"]["requestedSchema"]
    assert schema["properties"]["decision"]["enum"] == ["allow_once", "allow_session", "deny"]


async def test_an_approval_denied_keeps_the_tool_from_running(tmp_path: Path) -> None:
    answers = Answers({"action": "accept", "content": {"decision": "deny"}})
    script = [WRITE, {"expect_contains": "the user denied write_file", "content": "not written"}]
    record = await _run(tmp_path, script, answers)
    assert record["status"] == "completed" and record["final_text"] == "not written"
    assert not (tmp_path / "ws" / "a.txt").exists()
    assert _approvals(record) == [("task", "deny")]


async def test_a_task_nobody_answers_ends_cancelled_after_park_timeout_s(tmp_path: Path) -> None:
    record = await _run(tmp_path, [WRITE], None, park_timeout_s=0.2, approvals={"timeout_s": 3600})
    assert record["text"].startswith("[task cancelled]") and "park_timeout_s=0.2" in record["text"]
    assert not (tmp_path / "ws" / "a.txt").exists()


async def test_a_task_whose_request_declared_no_elicitation_follows_the_headless_policy(tmp_path: Path) -> None:
    answers = Answers(ALLOW)
    script = [WRITE, {"expect_contains": "nobody could be asked", "content": "could not"}]
    record = await _run(tmp_path, script, answers, elicitation=False)
    assert record["status"] == "completed" and answers.asked == {}
    assert _approvals(record) == [("none", "no_channel")]
    assert not (tmp_path / "ws" / "a.txt").exists()


async def test_tasks_get_shows_input_required_and_session_get_awaiting_input(tmp_path: Path) -> None:
    server = create_server(make_settings(tmp_path, tools={"write": True}), llm=ScriptedLLM([WRITE, {"content": "ok"}]))
    created = anyio.Event()
    task_ids: list[str] = []

    def on_task(task_id: str) -> None:
        task_ids.append(task_id)
        created.set()

    extension = mcp_tasks().TasksExtension(on_task=on_task)  # no on_input: it polls on
    with anyio.fail_after(20):
        async with Client(server, extensions=[extension], elicitation_callback=declare_elicitation) as client:
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "run_turn", {"prompt": "write it", "session_id": "new"})
                await created.wait()
                task = await mcp_tasks().get_task(client.session, task_ids[0])
                while task.status == "working":
                    task = await mcp_tasks().get_task(client.session, task_ids[0])
                assert task.status == "input_required" and task.input_requests is not None
                (key,) = task.input_requests
                listed = await client.call_tool("session_list", {})
                assert listed.structured_content is not None
                (only,) = listed.structured_content["sessions"]
                session = await client.call_tool("session_get", {"session_id": only["session_id"]})
                assert session.structured_content is not None
                (turn,) = session.structured_content["turns"]
                assert turn["status"] == "awaiting_input"
                got = await client.call_tool("turn_get", {"turn_id": turn["turn_id"]})
                assert (got.structured_content or {})["status"] == "awaiting_input"
                assert isinstance(got.content[0], types.TextContent)
                assert got.content[0].text.startswith("[turn awaiting_input]") and got.is_error is False
                await mcp_tasks().update(client.session, task_ids[0], {key: ALLOW, "approve-unknown": ALLOW})
            done = await mcp_tasks().get_task(client.session, task_ids[0])
    assert done.status == "completed" and done.result is not None
    assert done.result["structuredContent"]["status"] == "completed"


async def test_a_task_on_the_clients_model_asks_for_each_model_call(tmp_path: Path) -> None:
    """No model configured and sampling declared: each model call is an `llm-<n>` input request."""
    answered: list[str] = []

    async def on_input(key: str, request: dict[str, Any]) -> dict[str, Any]:
        assert request["method"] == "sampling/createMessage" and request["params"]["messages"]
        answered.append(key)
        return {"role": "assistant", "model": "client-llm", "content": {"type": "text", "text": "from the client"}}

    async def sample(context: ClientRequestContext, params: types.CreateMessageRequestParams) -> types.ErrorData:
        raise AssertionError("the server sent sampling/createMessage on 2026-07-28")

    server = create_server(make_settings(tmp_path))
    extension = mcp_tasks().TasksExtension(on_input=on_input)
    with anyio.fail_after(20):
        async with Client(server, extensions=[extension], sampling_callback=sample) as client:
            result = await client.call_tool("run_turn", {"prompt": "hi"})
    assert (result.structured_content or {})["status"] == "completed"
    assert (result.structured_content or {})["final_text"] == "from the client"
    assert answered == ["llm-1"]
