"""A turn always ends recorded: when its final write fails, a minimal `failed` record replaces it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from agent_server.agent.context import DISCARD, AgentDeps, TurnRequest
from agent_server.agent.preflight import COMPACTION_ATTEMPTS
from agent_server.agent.turns import run_turn
from agent_server.errors import CompactionConflict, StoreError
from agent_server.llm.scripted import ScriptedLLM
from agent_server.settings import Settings
from agent_server.store.base import SessionStore
from agent_server.store.memory import MemoryStore
from agent_server.store.sqlite import SqliteStore
from agent_server.tools.registry import ToolRegistry
from agent_server.types import CompactionRecord, Message, TurnRecord, utc_now

pytestmark = pytest.mark.anyio


class FullDisk(MemoryStore):
    """A store whose disk fills up: a write with history messages fails."""

    async def finish_turn(self, record: TurnRecord, messages: list[Message]) -> bool:
        if messages:
            raise StoreError("session store: database or disk is full")
        return await super().finish_turn(record, messages)


async def one_turn(tmp_path: Path, store: SessionStore, answer: str) -> tuple[str, TurnRecord]:
    session = await store.create_session(title="s", metadata={})
    deps = AgentDeps(
        settings=Settings(workspace=tmp_path, state_dir=tmp_path / "state"),
        store=store,
        llm=ScriptedLLM([{"content": answer}]),
        tools=ToolRegistry([]),
    )
    request = TurnRequest(prompt="hi", session_id=session.session_id, trace_id="tr", max_tool_passes=5)
    with anyio.fail_after(5):
        return session.session_id, await run_turn(deps, request, DISCARD)


async def assert_recorded_as_unstored(store: SessionStore, session_id: str, record: TurnRecord, why: str) -> None:
    assert record.status == "failed"
    assert record.error is not None and record.error.type == "store_error"
    assert "could not be stored" in record.error.message and why in record.error.message
    assert await store.get_turn(session_id, record.turn_id) == record
    assert (await store.load_history(session_id)).messages == []


async def test_a_full_disk_at_the_final_write_leaves_a_failed_record(tmp_path: Path) -> None:
    store = FullDisk()
    session_id, record = await one_turn(tmp_path, store, "fine")
    await assert_recorded_as_unstored(store, session_id, record, "disk is full")


async def test_a_record_sqlite_cannot_encode_leaves_a_failed_record(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "state")
    try:
        session_id, record = await one_turn(tmp_path, store, "half a pair \ud800 of surrogates")
        await assert_recorded_as_unstored(store, session_id, record, "cannot encode")
    finally:
        await store.close()


class AlwaysCompactedElsewhere(MemoryStore):
    """A session that another process compacts every time this one tries."""

    async def save_compaction(
        self, session_id: str, record: CompactionRecord, *, archive_through_seq: int, live_from_seq: int
    ) -> None:
        raise CompactionConflict(session_id)


async def test_a_preflight_compaction_that_keeps_conflicting_does_not_fail_the_turn(tmp_path: Path) -> None:
    store = AlwaysCompactedElsewhere()
    session = await store.create_session(title="s", metadata={})
    for i in range(6):
        record = TurnRecord(turn_id=f"t{i}", session_id=session.session_id, trace_id="tr", status="running",
                            prompt="p", started_at=utc_now())  # fmt: skip
        await store.begin_turn(record)
        big = [Message(role="user", content="x" * 2_000), Message(role="assistant", content="y" * 2_000)]
        assert await store.finish_turn(record.model_copy(update={"status": "completed"}), big)
    settings = Settings(workspace=tmp_path, state_dir=tmp_path / "state", context_window=1_000, compact_keep_last=2)
    summaries = [{"content": "summary"}] * COMPACTION_ATTEMPTS
    deps = AgentDeps(
        settings=settings, store=store, llm=ScriptedLLM([*summaries, {"content": "answer"}]), tools=ToolRegistry([])
    )
    request = TurnRequest(prompt="hi", session_id=session.session_id, trace_id="tr", max_tool_passes=5)
    with anyio.fail_after(5):
        done = await run_turn(deps, request, DISCARD)
    assert (done.status, done.final_text, done.compaction) == ("completed", "answer", None)
