"""A turn always ends recorded: when its final write fails, a minimal `failed` record replaces it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from agent_server.agent.context import DISCARD, AgentDeps, TurnRequest
from agent_server.agent.turns import run_turn
from agent_server.errors import StoreError
from agent_server.llm.scripted import ScriptedLLM
from agent_server.settings import Settings
from agent_server.store.base import SessionStore
from agent_server.store.memory import MemoryStore
from agent_server.store.sqlite import SqliteStore
from agent_server.tools.registry import ToolRegistry
from agent_server.types import Message, TurnRecord

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
