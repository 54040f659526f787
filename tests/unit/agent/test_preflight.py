"""Compaction against a second process: two stores on one state dir compacting one session at once."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from agent_server.agent.context import DISCARD, AgentDeps
from agent_server.agent.preflight import COMPACTION_ATTEMPTS, compact_session
from agent_server.errors import CompactionConflict
from agent_server.events import EventIds
from agent_server.llm.base import ModelRequest, ModelResponse, RetryCallback, TextCallback
from agent_server.settings import Settings
from agent_server.store.base import SessionStore
from agent_server.store.sqlite import SqliteStore
from agent_server.tools.registry import ToolRegistry
from agent_server.types import Message, TurnRecord, utc_now

pytestmark = pytest.mark.anyio

IDS: EventIds = {"turn_id": "compact_1", "session_id": "-", "trace_id": "tr"}


class EchoLLM:
    """Answers a summary request with the request itself, so a summary shows what it covers.

    `meanwhile` runs inside the first `meanwhile_calls` calls: the other process's work, done
    while this one waits for its model.
    """

    name = "echo"

    def __init__(self, meanwhile: Callable[[], Awaitable[object]] | None = None, meanwhile_calls: int = 1) -> None:
        self.meanwhile = meanwhile
        self.meanwhile_calls = meanwhile_calls
        self.calls = 0

    async def complete(
        self, request: ModelRequest, *, on_text: TextCallback | None = None, on_retry: RetryCallback | None = None
    ) -> ModelResponse:
        self.calls += 1
        if self.meanwhile is not None and self.calls <= self.meanwhile_calls:
            await self.meanwhile()
        return ModelResponse(text=request.messages[-1].text())


def deps_for(tmp_path: Path, store: SessionStore, llm: EchoLLM) -> AgentDeps:
    settings = Settings(workspace=tmp_path, state_dir=tmp_path / "state")
    return AgentDeps(settings=settings, store=store, llm=llm, tools=ToolRegistry([]))


async def session_with_messages(store: SessionStore, count: int) -> str:
    """A session whose messages say <m01>, <m02>, ... (one turn per user/assistant pair)."""
    session_id = (await store.create_session(title="s", metadata={})).session_id
    for pair in range(count // 2):
        record = TurnRecord(
            turn_id=f"turn_{pair}", session_id=session_id, trace_id="tr", status="running", prompt="p",
            started_at=utc_now(),
        )  # fmt: skip
        await store.begin_turn(record)
        done = record.model_copy(update={"status": "completed", "finished_at": utc_now()})
        messages = [
            Message(role="user", content=f"<m{2 * pair + 1:02}>"),
            Message(role="assistant", content=f"<m{2 * pair + 2:02}>"),
        ]
        assert await store.finish_turn(done, messages)
    return session_id


async def compact(deps: AgentDeps, session_id: str, keep_last: int) -> None:
    await compact_session(
        deps, session_id, keep_last=keep_last, instructions=None, reason="manual", dry_run=False, emit=DISCARD, ids=IDS
    )


async def test_two_processes_compacting_at_once_lose_no_history(tmp_path: Path) -> None:
    """B archives 1..18 while A summarises 1..14: A must not save a summary that misses 15..18."""
    first = await SqliteStore.open(tmp_path / "state")
    second = await SqliteStore.open(tmp_path / "state")
    try:
        session_id = await session_with_messages(first, 20)
        other = deps_for(tmp_path, second, EchoLLM())
        mine = deps_for(tmp_path, first, EchoLLM(meanwhile=lambda: compact(other, session_id, keep_last=2)))
        with anyio.fail_after(10):
            await compact(mine, session_id, keep_last=6)
        history = await first.load_history(session_id)
        archived = [m.message.text() for m, done in await first.all_messages(session_id) if done]
        live = [m.message.text() for m in history.messages]
    finally:
        await first.close()
        await second.close()
    assert history.summary is not None
    covered = set(re.findall(r"<m\d\d>", history.summary))
    assert set(archived) <= covered, f"archived but not summarised: {sorted(set(archived) - covered)}"
    assert archived + live == [f"<m{i:02}>" for i in range(1, 21)]
    assert live == ["<m19>", "<m20>"]  # A's retry found only B's kept messages (fewer than its keep_last)


async def test_a_compaction_that_keeps_losing_the_race_is_reported(tmp_path: Path) -> None:
    first = await SqliteStore.open(tmp_path / "state")
    second = await SqliteStore.open(tmp_path / "state")
    try:
        session_id = await session_with_messages(first, 40)
        other = deps_for(tmp_path, second, EchoLLM())
        keep = iter(range(30, 0, -4))

        async def compact_further() -> None:
            await compact(other, session_id, keep_last=next(keep))

        llm = EchoLLM(meanwhile=compact_further, meanwhile_calls=COMPACTION_ATTEMPTS)
        with anyio.fail_after(10), pytest.raises(CompactionConflict):
            await compact(deps_for(tmp_path, first, llm), session_id, keep_last=2)
        assert llm.calls == COMPACTION_ATTEMPTS
        summary = (await first.load_history(session_id)).summary or ""
        archived = [m.message.text() for m, done in await first.all_messages(session_id) if done]
    finally:
        await first.close()
        await second.close()
    assert set(archived) <= set(re.findall(r"<m\d\d>", summary))
