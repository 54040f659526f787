"""A running turn's record reaches the store as it goes (`agent.progress`, settings `view.progress_interval_s`), so
that pages of other processes show it live; with the interval 0 only its start and end are written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_server.agent.context import DISCARD, AgentDeps, TurnRequest
from agent_server.agent.progress import ProgressKeeper
from agent_server.agent.turns import run_turn
from agent_server.llm.base import ModelRequest, ModelResponse
from agent_server.runtime import AgentRuntime
from agent_server.settings import Settings
from agent_server.store.memory import MemoryStore
from agent_server.store.sqlite import SqliteStore
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
    """Asks for a tool (once `first` is set, if given), then answers only once the store holds the turn's first
    model call (or at once)."""

    name = "waits"

    def __init__(self, store: Watched, *, wait: bool, first: anyio.Event | None = None) -> None:
        self.store, self.wait, self.first, self.calls = store, wait, first, 0

    async def complete(self, request: ModelRequest, **_: Any) -> ModelResponse:
        self.calls += 1
        if self.calls == 1:
            if self.first is not None:
                await self.first.wait()
            return ModelResponse(text="looking", tool_calls=[ToolCall(id="c1", name="nothing_here")])
        if self.wait:
            await self.store.model_call_stored.wait()
        return ModelResponse(text="done")


async def run_turns(tmp_path: Path, interval: float, *models: WaitsForTheStore) -> list[TurnRecord]:
    """A turn for each of `models` (on its model's store), all at once, with one progress keeper of `interval`
    (none for 0) as the runtime runs one."""
    settings = Settings(
        workspace=tmp_path, state_dir=tmp_path / "state", view=ViewSettings(progress_interval_s=interval)
    )
    keeper = ProgressKeeper(interval) if interval > 0 else None
    records: list[TurnRecord] = []

    async def one(llm: WaitsForTheStore) -> None:
        session = await llm.store.create_session(title="s", metadata={})
        request = TurnRequest(prompt="hi", session_id=session.session_id, trace_id="tr", max_tool_passes=5)
        deps = AgentDeps(settings=settings, store=llm.store, llm=llm, tools=ToolRegistry([]), progress=keeper)
        records.append(await run_turn(deps, request, DISCARD))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as keeping:
            if keeper is not None:
                keeping.start_soon(keeper.run)
            async with anyio.create_task_group() as tg:
                for llm in models:
                    tg.start_soon(one, llm)
            keeping.cancel_scope.cancel()
    return records


async def a_turn(tmp_path: Path, interval: float, *, wait: bool) -> tuple[Watched, TurnRecord]:
    store = Watched()
    [record] = await run_turns(tmp_path, interval, WaitsForTheStore(store, wait=wait))
    return store, record


async def test_a_running_turn_is_stored_as_it_goes_and_ends_with_its_final_record(tmp_path: Path) -> None:
    store, record = await a_turn(tmp_path, 0.01, wait=True)  # the model waits until the store shows its first call
    assert record.status == "completed"
    assert store.progress and all(r.status == "running" for r in store.progress)
    assert store.progress[-1].assistant_turns[0].text == "looking"
    assert await store.get_turn(record.session_id, record.turn_id) == record


async def test_with_the_interval_zero_nothing_is_written_in_between(tmp_path: Path) -> None:
    store, record = await a_turn(tmp_path, 0, wait=False)
    assert record.status == "completed" and store.progress == []


async def test_a_turn_that_ends_within_the_first_interval_writes_nothing_in_between(tmp_path: Path) -> None:
    store, record = await a_turn(tmp_path, 3600, wait=False)
    assert record.status == "completed" and store.progress == []


class Failing(Watched):
    """Every progress write fails, as a bug below the store's interface would (`model_call_stored` is set when
    one was tried)."""

    async def save_progress(self, record: TurnRecord) -> None:
        self.model_call_stored.set()
        raise RuntimeError("a bug")


async def test_one_keeper_writes_every_running_turn_and_a_failing_store_stops_only_its_own(tmp_path: Path) -> None:
    failing, stores = Failing(), [Watched(), Watched()]
    # The other turns' first model calls come only after the failed write: the keeper must still write them.
    models = [WaitsForTheStore(store, wait=True, first=failing.model_call_stored) for store in stores]
    records = await run_turns(tmp_path, 0.01, WaitsForTheStore(failing, wait=True), *models)
    assert [r.status for r in records].count("completed") == 3
    for store in stores:
        assert store.progress[-1].assistant_turns[0].text == "looking"
    assert failing.progress == []


def test_a_keeper_needs_a_positive_interval() -> None:
    with pytest.raises(ValueError, match="interval_s must be positive"):
        ProgressKeeper(0)


async def test_the_runtime_keeps_the_progress_of_its_turns_in_its_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = Watched()  # what reached the runtime's SQLite store
    write = SqliteStore.save_progress

    async def spied(store: SqliteStore, record: TurnRecord) -> None:
        await write(store, record)
        seen.progress.append(record)
        if record.assistant_turns:
            seen.model_call_stored.set()

    monkeypatch.setattr(SqliteStore, "save_progress", spied)
    settings = Settings(workspace=tmp_path, state_dir=tmp_path / "state", view=ViewSettings(progress_interval_s=0.01))
    with anyio.fail_after(10):
        async with AgentRuntime(settings, llm=WaitsForTheStore(seen, wait=True)) as runtime:
            record = await runtime.run_turn("hi", session_id="new")
    assert record.status == "completed"
    assert seen.progress and all(r.status == "running" and r.turn_id == record.turn_id for r in seen.progress)
