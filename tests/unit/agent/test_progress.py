"""A running turn's record reaches the store as it goes (`agent.progress`, settings `view.progress_interval_s`), so
that pages of other processes show it live; with the interval 0 only its start and end are written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_server.agent.context import DISCARD, AgentDeps, TurnRequest
from agent_server.agent.turns import run_turn
from agent_server.llm.base import ModelRequest, ModelResponse
from agent_server.settings import Settings
from agent_server.store.memory import MemoryStore
from agent_server.tools.registry import ToolRegistry
from agent_server.types import ToolCall, TurnRecord
from agent_server.view.settings import ViewSettings

pytestmark = pytest.mark.anyio


class Watched(MemoryStore):
    """Keeps every progress write, and says when one holds a model call."""

    def __init__(self) -> None:
        super().__init__()
        self.progress: list[TurnRecord] = []
        self.model_call_stored = anyio.Event()

    async def save_progress(self, record: TurnRecord) -> None:
        await super().save_progress(record)
        self.progress.append(record)
        if record.assistant_turns:
            self.model_call_stored.set()


class WaitsForTheStore:
    """Asks for a tool, then answers only once the store holds the turn's first model call (or at once)."""

    name = "waits"

    def __init__(self, store: Watched, *, wait: bool) -> None:
        self.store, self.wait, self.calls = store, wait, 0

    async def complete(self, request: ModelRequest, **_: Any) -> ModelResponse:
        self.calls += 1
        if self.calls == 1:
            return ModelResponse(text="looking", tool_calls=[ToolCall(id="c1", name="nothing_here")])
        if self.wait:
            await self.store.model_call_stored.wait()
        return ModelResponse(text="done")


async def a_turn(tmp_path: Path, interval: float, *, wait: bool) -> tuple[Watched, TurnRecord]:
    store = Watched()
    session = await store.create_session(title="s", metadata={})
    settings = Settings(
        workspace=tmp_path, state_dir=tmp_path / "state", view=ViewSettings(progress_interval_s=interval)
    )
    deps = AgentDeps(settings=settings, store=store, llm=WaitsForTheStore(store, wait=wait), tools=ToolRegistry([]))
    request = TurnRequest(prompt="hi", session_id=session.session_id, trace_id="tr", max_tool_passes=5)
    with anyio.fail_after(10):
        return store, await run_turn(deps, request, DISCARD)


async def test_a_running_turn_is_stored_as_it_goes_and_ends_with_its_final_record(tmp_path: Path) -> None:
    store, record = await a_turn(tmp_path, 0.01, wait=True)  # the model waits until the store shows its first call
    assert record.status == "completed"
    assert store.progress and all(r.status == "running" for r in store.progress)
    assert store.progress[-1].assistant_turns[0].text == "looking"
    assert await store.get_turn(record.session_id, record.turn_id) == record


async def test_with_the_interval_zero_nothing_is_written_in_between(tmp_path: Path) -> None:
    store, record = await a_turn(tmp_path, 0, wait=False)
    assert record.status == "completed" and store.progress == []
