"""Approvals answered in the web view (settings `approvals.web`), end to end in both eras: a client that cannot be
asked (no form elicitation, as `codex exec` or `claude -p`) runs `write_file` once the question, kept in the
store, is answered; by a page of this process (at once) or of another process on the same store (its next
look); foreground and background turns; denial, expiry, and `"always"` over a client that could be asked."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from agent_server.llm.scripted import ScriptedLLM
from agent_server.runtime import AgentRuntime
from agent_server.server.app import create_server
from agent_server.settings import ApprovalSettings, Settings, ToolsOptions
from agent_server.turn_options import TurnOptions
from agent_server.types import PendingApproval
from tests.interaction.harness import MODES, make_settings
from tests.interaction.test_approvals import ALLOW_ONCE, User

pytestmark = pytest.mark.anyio

WRITE: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "from the page\n"}}]},
    {"content": "Written."},
]


@dataclass
class Served:
    client: Client
    runtime: AgentRuntime
    """The server's own runtime: what a page beside `/mcp` answers through."""
    settings: Settings


@asynccontextmanager
async def serve(
    tmp_path: Path, *, mode: str, web: bool | str = True, user: User | None = None
) -> AsyncIterator[Served]:
    await anyio.Path(tmp_path).mkdir(parents=True, exist_ok=True)
    settings = make_settings(
        tmp_path,
        tools=ToolsOptions(write=True),
        approvals=ApprovalSettings(web=web, timeout_s=30),  # type: ignore[arg-type]
    )
    server = create_server(settings, llm=ScriptedLLM(WRITE))
    held: list[AgentRuntime] = []
    opened = server.lifespan

    @asynccontextmanager
    async def holding(app: Any) -> AsyncIterator[AgentRuntime]:
        async with opened(app) as runtime:
            held.append(runtime)
            yield runtime

    server.lifespan = holding
    with anyio.fail_after(20):
        async with Client(server, mode=mode, elicitation_callback=user) as client:
            yield Served(client, held[0], settings)


async def next_question(runtime: AgentRuntime) -> PendingApproval:
    """The first question that waits in the web view, once the turn says it is in the store."""
    with runtime.watch_turns() as watch:
        pending = await runtime.pending_approvals()
        while not pending:
            event = await watch.events.receive()
            if event.type == "status" and event.phase == "approval":
                pending = await runtime.pending_approvals()
    return pending[0]


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_that_cannot_be_asked_writes_once_the_page_allows_it(tmp_path: Path, mode: str) -> None:
    async with serve(tmp_path, mode=mode) as s, anyio.create_task_group() as tg:
        results: list[Any] = []

        async def turn() -> None:
            results.append(await s.client.call_tool("run_turn", {"prompt": "write it", "detail": "full"}))

        tg.start_soon(turn)
        question = await next_question(s.runtime)
        assert question.tool == "write_file" and question.choices == ["allow_once", "allow_session", "deny"]
        assert "out.txt" in question.shown and "from the page" in question.shown
        assert not (s.settings.workspace / "out.txt").exists()
        assert not await s.runtime.answer_approval(question.question_id, "yes please")  # not a choice
        assert not await s.runtime.as_principal("alice").answer_approval(question.question_id, "allow_once")
        assert await s.runtime.answer_approval(question.question_id, "allow_once")
    record = results[0].structured_content
    assert record["status"] == "completed", record
    assert (s.settings.workspace / "out.txt").read_text() == "from the page\n"
    assert [(a["tool"], a["channel"], a["decision"]) for a in record["approvals"]] == [
        ("write_file", "web", "allow_once")
    ]
    assert await s.runtime.pending_approvals() == []  # answered: no longer listed


@pytest.mark.parametrize("mode", MODES)
async def test_a_page_of_another_process_on_the_store_answers_a_background_turn(tmp_path: Path, mode: str) -> None:
    async with serve(tmp_path, mode=mode) as s:
        started = await s.client.call_tool("run_turn", {"prompt": "write it", "background": True})
        turn_id = started.structured_content["turn_id"]
        question = await next_question(s.runtime)
        async with AgentRuntime(s.settings) as elsewhere:  # `agent-server view` on the same state dir
            assert [q.question_id for q in await elsewhere.pending_approvals()] == [question.question_id]
            assert await elsewhere.answer_approval(question.question_id, "allow_session")
        with anyio.fail_after(10):
            done = await s.client.call_tool("turn_wait", {"turn_id": turn_id, "timeout_s": 10, "detail": "full"})
    assert done.structured_content["status"] == "completed", done.structured_content
    assert (s.settings.workspace / "out.txt").exists()
    assert [a["decision"] for a in done.structured_content["approvals"]] == ["allow_session"]


async def test_a_denial_in_the_page_runs_nothing_and_the_model_reads_why(tmp_path: Path) -> None:
    async with serve(tmp_path, mode="auto") as s, anyio.create_task_group() as tg:
        results: list[Any] = []

        async def turn() -> None:
            results.append(await s.client.call_tool("run_turn", {"prompt": "write it", "detail": "full"}))

        tg.start_soon(turn)
        question = await next_question(s.runtime)
        assert await s.runtime.answer_approval(question.question_id, "deny")
    record = results[0].structured_content
    assert not (s.settings.workspace / "out.txt").exists()
    assert [a["decision"] for a in record["approvals"]] == ["deny"]
    result = record["tool_rounds"][0]["tool_results"][0]
    assert result["is_error"] and "denied in the web view" in result["content"][0]["text"]


async def test_an_unanswered_question_expires_with_the_approval_timeout(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path, tools=ToolsOptions(write=True), approvals=ApprovalSettings(web=True, timeout_s=0.3)
    )
    async with AgentRuntime(settings, llm=ScriptedLLM(WRITE)) as runtime:
        with anyio.fail_after(10):
            record = await runtime.run_turn("write it")
        assert await runtime.pending_approvals() == []
    assert [(a.channel, a.decision) for a in record.approvals] == [("web", "timeout")]
    assert not (settings.workspace / "out.txt").exists()


async def test_with_a_client_that_can_be_asked_the_client_is_asked_unless_web_is_always(tmp_path: Path) -> None:
    user = User({"": ALLOW_ONCE})
    async with serve(tmp_path / "a", mode="legacy", web=True, user=user) as s:
        with anyio.fail_after(10):
            result = await s.client.call_tool("run_turn", {"prompt": "write it", "detail": "full"})
    assert [a["channel"] for a in result.structured_content["approvals"]] == ["elicitation"]
    assert len(user.asked) == 1

    never = User({"": ALLOW_ONCE})
    async with serve(tmp_path / "b", mode="legacy", web="always", user=never) as s, anyio.create_task_group() as tg:
        results: list[Any] = []

        async def turn() -> None:
            results.append(await s.client.call_tool("run_turn", {"prompt": "write it", "detail": "full"}))

        tg.start_soon(turn)
        question = await next_question(s.runtime)
        assert await s.runtime.answer_approval(question.question_id, "allow_once")
    assert [a["channel"] for a in results[0].structured_content["approvals"]] == ["web"]
    assert never.asked == []


async def test_an_acp_style_turn_with_its_own_channel_asks_the_page_when_web_is_always(tmp_path: Path) -> None:
    """ACP always has a channel (`session/request_permission`): the page is asked instead with `"always"`."""

    class Editor:
        name = "acp"
        asked = 0

        async def ask(self, request: Any) -> Any:
            Editor.asked += 1
            raise AssertionError("the editor must not be asked")

        async def elicit(self, request: Any) -> Any:
            raise AssertionError("no form expected")

    settings = make_settings(
        tmp_path, tools=ToolsOptions(write=True), approvals=ApprovalSettings(web="always", timeout_s=30)
    )
    async with AgentRuntime(settings, llm=ScriptedLLM(WRITE)) as runtime, anyio.create_task_group() as tg:
        records: list[Any] = []

        async def turn() -> None:
            records.append(await runtime.run_turn("write it", options=TurnOptions(approvals=Editor())))

        tg.start_soon(turn)
        question = await next_question(runtime)
        assert await runtime.answer_approval(question.question_id, "allow_once")
    assert [(a.channel, a.decision) for a in records[0].approvals] == [("web", "allow_once")]
    assert Editor.asked == 0 and (settings.workspace / "out.txt").exists()
