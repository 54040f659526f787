"""A running turn as its pollers see it, in both eras: its record shows the progress so far (model calls, tool
calls, usage) in turn_get, turn_wait and session_get; the text of a `running` result says where it is and what
it did, so that successive polls differ (a host's loop detector takes identical calls, or results, for a loop),
and names the `after_event` that continues after it; an MCP task's status says what the turn does or waits for."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client import ClaimContext, ResultClaim

from agent_server.llm.base import ModelRequest, ModelResponse, RetryCallback, TextCallback
from agent_server.llm.scripted import ScriptedLLM
from agent_server.server.app import create_server
from tests.interaction.harness import MODES, make_settings
from tests.interaction.test_tasks import mcp_tasks

pytestmark = pytest.mark.anyio

LOOK = {"content": "", "tool_calls": [{"name": "list_dir", "arguments": {}}], "usage": {"prompt_tokens": 100}}
SCRIPT = [LOOK, LOOK, {"content": "Seen it all.", "usage": {"prompt_tokens": 150, "completion_tokens": 5}}]


class SteppedLLM:
    """A scripted model whose every call waits for the test's permit: the turn stops where the test wants."""

    name = "stepped"

    def __init__(self, responses: list[dict[str, Any]]) -> None:
        self._inner = ScriptedLLM(responses)
        self.calls = 0
        self._permits = 0
        self._changed = anyio.Event()

    def allow(self, calls: int = 1) -> None:
        self._permits += calls
        self._notify()

    async def waiting(self, call: int) -> None:
        """Until the `call`-th model call (from 1) has been asked for (and waits for its permit)."""
        while self.calls < call:
            await self._changed.wait()

    async def complete(
        self, request: ModelRequest, *, on_text: TextCallback | None = None, on_retry: RetryCallback | None = None
    ) -> ModelResponse:
        self.calls += 1
        self._notify()
        while self._permits == 0:
            await self._changed.wait()
        self._permits -= 1
        return await self._inner.complete(request, on_text=on_text, on_retry=on_retry)

    def _notify(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()


@dataclass
class Bench:
    client: Client
    llm: SteppedLLM

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        result = await self.client.call_tool(tool, arguments)
        assert result.is_error is False, result
        return result


@asynccontextmanager
async def bench(tmp_path: Path, mode: str, responses: Sequence[dict[str, Any]] = SCRIPT) -> AsyncIterator[Bench]:
    llm = SteppedLLM(list(responses))
    with anyio.fail_after(20):
        async with Client(create_server(make_settings(tmp_path), llm=llm), mode=mode) as client:
            yield Bench(client, llm)


def text_of(result: types.CallToolResult) -> str:
    content = result.content[0]
    assert isinstance(content, types.TextContent)
    return content.text


@pytest.mark.parametrize("mode", MODES)
async def test_a_running_turns_results_show_its_progress_and_successive_polls_differ(tmp_path: Path, mode: str) -> None:
    async with bench(tmp_path, mode) as b:
        started = (await b.call("run_turn", {"prompt": "look around", "background": True})).structured_content
        assert started is not None
        turn = {"turn_id": started["turn_id"]}
        b.llm.allow()
        await b.llm.waiting(2)  # one model call and its tool round are done; the second call waits
        first = await b.call("turn_wait", {**turn, "timeout_s": 0.05})
        got = await b.call("turn_get", turn)
        listed = await b.call("session_get", {"session_id": started["session_id"]})
        b.llm.allow()
        await b.llm.waiting(3)
        second = await b.call("turn_wait", {**turn, "timeout_s": 0.05})
        b.llm.allow()
        ended = await b.call("turn_wait", {**turn, "timeout_s": 30})
    record = first.structured_content
    assert record is not None and record["status"] == "running"
    assert record["model_calls"] == 1 and [c["name"] for c in record["tool_calls"]] == ["list_dir"]
    assert record["usage"]["prompt_tokens"] == 100
    assert (got.structured_content or {})["model_calls"] == 1
    assert [t["model_calls"] for t in (listed.structured_content or {})["turns"]] == [1]
    text = text_of(first)
    assert text.startswith(f"[turn running] turn {started['turn_id']} of session {started['session_id']}: ")
    assert "waiting for the model (call 2)" in text and "1 model call, 1 tool call in 1 round" in text
    assert re.search(r"after_event=(\d+)", text) is not None
    assert int(re.findall(r"after_event=(\d+)", text)[0]) == record["last_event"]  # the call that continues
    assert "1 model call, 1 tool call in 1 round" in text_of(got)
    assert "2 model calls, 2 tool calls in 2 rounds" in text_of(second)
    assert text_of(second) != text and (second.structured_content or {})["last_event"] > record["last_event"]
    assert (ended.structured_content or {})["status"] == "completed" and text_of(ended) == "Seen it all."


class CreatedTasks:
    """A tasks extension that also keeps each `CreateTaskResult` (the task's first status)."""

    def __init__(self) -> None:
        self.extension = mcp_tasks().TasksExtension()
        self.created: list[Any] = []
        inner = self.extension.claims()[0]

        async def resolve(created: Any, ctx: ClaimContext) -> types.CallToolResult:
            self.created.append(created)
            return await inner.resolve(created, ctx)

        self.extension.claims = lambda: [ResultClaim(result_type="task", model=inner.model, resolve=resolve)]


async def test_a_tasks_first_status_on_a_new_session_says_it_is_starting_not_queued(tmp_path: Path) -> None:
    tasks = CreatedTasks()
    server = create_server(make_settings(tmp_path), llm=ScriptedLLM([{"content": "done"}]))
    with anyio.fail_after(20):
        async with Client(server, extensions=[tasks.extension]) as client:
            result = await client.call_tool("run_turn", {"prompt": "hello", "session_id": "new"})
    assert result.is_error is False
    (created,) = tasks.created
    assert created.status == "working"
    assert created.status_message.startswith("starting (0 model calls, 0 tool calls, ")
    assert "queued" not in created.status_message and "earlier turn" not in created.status_message
