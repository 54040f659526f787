"""The tool registry: merging, routing, errors, filtered views and cancellation."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_server.tools.base import ProgressCallback
from agent_server.tools.builtin import WorkspaceToolset
from agent_server.tools.registry import ToolRegistry
from agent_server.types import DroppedTool, TextPart, ToolCall, ToolResult, ToolSpec

pytestmark = pytest.mark.anyio


class FakeToolset:
    """Offers `names` from `source`; a call answers `<source>:<name>` and is recorded."""

    def __init__(self, source: str, *names: str) -> None:
        self.source = source
        self.names = list(names)
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    async def list_tools(self) -> list[ToolSpec]:
        return [ToolSpec(name=name, source=self.source) for name in self.names]

    async def call_tool(self, call: ToolCall, *, on_progress: ProgressCallback | None = None) -> ToolResult:
        self.calls.append((call.id, call.name, call.arguments))
        if on_progress is not None:
            await on_progress(1, 2, "half")
        return ToolResult(call_id=call.id, name=call.name, content=[TextPart(text=f"{self.source}:{call.name}")])


class RaisingToolset(FakeToolset):
    async def call_tool(self, call: ToolCall, *, on_progress: ProgressCallback | None = None) -> ToolResult:
        raise ValueError("boom: token=sk-not-for-the-model")


class BlockingToolset(FakeToolset):
    """A call that waits forever; `started` is set once it runs, `cancelled` when it was cancelled."""

    def __init__(self, source: str, *names: str) -> None:
        super().__init__(source, *names)
        self.started = anyio.Event()
        self.cancelled = False

    async def call_tool(self, call: ToolCall, *, on_progress: ProgressCallback | None = None) -> ToolResult:
        self.started.set()
        try:
            await anyio.Event().wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled = True
            raise
        raise AssertionError("unreachable")


async def test_list_tools_merges_in_order() -> None:
    registry = ToolRegistry([FakeToolset("builtin", "read_file", "list_dir"), FakeToolset("mcp:git", "git__log")])
    specs = await registry.list_tools()
    assert [(spec.name, spec.source) for spec in specs] == [
        ("read_file", "builtin"),
        ("list_dir", "builtin"),
        ("git__log", "mcp:git"),
    ]
    assert await registry.refresh() == specs


async def test_a_name_offered_again_is_dropped_from_the_later_toolset_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    builtin, plugin = FakeToolset("builtin", "read_file", "list_dir"), FakeToolset("plugin", "read_file", "extra")
    registry = ToolRegistry([builtin, plugin])
    with caplog.at_level(logging.WARNING, logger="agent_server.tools.registry"):
        assert [(s.name, s.source) for s in await registry.refresh()] == [
            ("read_file", "builtin"),
            ("list_dir", "builtin"),
            ("extra", "plugin"),
        ]
        await registry.refresh()
    reason = "its name is already taken by the tool from 'builtin'"
    assert registry.dropped() == [DroppedTool(name="read_file", source="plugin", reason=reason)]
    assert [r.getMessage() for r in caplog.records] == [
        f"tool 'read_file' (plugin) is not offered to the model: {reason}"
    ]
    assert (await registry.call_tool(ToolCall(id="c1", name="read_file", arguments={}))).text() == "builtin:read_file"
    assert (await registry.call_tool(ToolCall(id="c2", name="extra", arguments={}))).text() == "plugin:extra"


async def test_dropped_lists_the_toolsets_own_drops_too() -> None:
    class Dropping(FakeToolset):
        def dropped(self) -> list[DroppedTool]:
            return [DroppedTool(name="m__bad", source=self.source, reason="its input schema is not valid")]

    registry = ToolRegistry([FakeToolset("builtin", "a"), Dropping("mcp:m", "m__good")])
    assert [s.name for s in await registry.list_tools()] == ["a", "m__good"]
    assert [d.name for d in registry.dropped()] == ["m__bad"]


async def test_call_routes_to_the_owner_lazily() -> None:
    first, second = FakeToolset("builtin", "a"), FakeToolset("mcp:x", "b")
    registry = ToolRegistry([first, second])
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    result = await registry.call_tool(
        ToolCall(id="c1", name="b", arguments={"q": 1}), on_progress=on_progress
    )  # no list_tools before
    assert not result.is_error and result.text() == "mcp:x:b"
    assert second.calls == [("c1", "b", {"q": 1})] and first.calls == []
    assert progress == [(1, 2, "half")]


async def test_tools_added_later_are_found() -> None:
    growing = FakeToolset("mcp:slow")
    registry = ToolRegistry([growing])
    assert await registry.list_tools() == []
    growing.names.append("slow__ping")
    assert (
        await registry.call_tool(ToolCall(id="c1", name="slow__ping", arguments={}))
    ).text() == "mcp:slow:slow__ping"


async def test_clash_appearing_while_running_leaves_the_other_new_tools_callable() -> None:
    builtin, late = FakeToolset("builtin", "read_file"), FakeToolset("plugin")
    registry = ToolRegistry([builtin, late])
    await registry.refresh()
    late.names += ["read_file", "new_tool"]
    assert (await registry.call_tool(ToolCall(id="c1", name="new_tool", arguments={}))).text() == "plugin:new_tool"
    assert (await registry.call_tool(ToolCall(id="c2", name="read_file", arguments={}))).text() == "builtin:read_file"
    assert [(d.name, d.source) for d in registry.dropped()] == [("read_file", "plugin")]


async def test_unknown_tool_is_an_error_result() -> None:
    registry = ToolRegistry([FakeToolset("builtin", "a")])
    result = await registry.call_tool(ToolCall(id="c1", name="nope", arguments={}))
    assert result.is_error and result.call_id == "c1" and result.name == "nope"
    assert result.text() == "unknown tool 'nope'"


async def test_duration_is_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks: Iterator[float] = iter([10.0, 12.5])
    monkeypatch.setattr("agent_server.tools.registry.time.perf_counter", lambda: next(ticks))
    registry = ToolRegistry([FakeToolset("builtin", "a")])
    await registry.refresh()
    assert (await registry.call_tool(ToolCall(id="c1", name="a", arguments={}))).duration_s == 2.5


async def test_exception_becomes_an_error_result_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    registry = ToolRegistry([RaisingToolset("plugin", "explode")])
    with caplog.at_level(logging.ERROR, logger="agent_server.tools.registry"):
        result = await registry.call_tool(ToolCall(id="c1", name="explode", arguments={}))
    assert result.is_error and "ValueError" in result.text() and "internal error" in result.text()
    assert "sk-not-for-the-model" not in result.text()
    assert any(record.exc_info and "explode" in record.getMessage() for record in caplog.records)


async def test_cancellation_propagates() -> None:
    blocking = BlockingToolset("mcp:slow", "wait")
    registry = ToolRegistry([blocking])
    outcome: list[ToolResult] = []

    async def run() -> None:
        outcome.append(await registry.call_tool(ToolCall(id="c1", name="wait", arguments={})))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await blocking.started.wait()
        group.cancel_scope.cancel()
    assert blocking.cancelled and outcome == []


async def test_deadline_cancels_the_call_instead_of_returning_a_result() -> None:
    blocking = BlockingToolset("mcp:slow", "wait")
    registry = ToolRegistry([blocking])
    outcome: list[ToolResult] = []
    with anyio.move_on_after(0.01) as scope:
        outcome.append(await registry.call_tool(ToolCall(id="c1", name="wait", arguments={})))
    assert scope.cancelled_caught and blocking.cancelled and outcome == []


async def test_filtered_view_exposes_and_routes_only_matching_tools() -> None:
    source = FakeToolset("builtin", "read_file", "list_dir", "search_text")
    registry = ToolRegistry([source, FakeToolset("mcp:git", "git__log")])
    view = registry.filtered(["read_*", "git__*"])
    assert [spec.name for spec in await view.list_tools()] == ["read_file", "git__log"]
    assert (await view.call_tool(ToolCall(id="c1", name="read_file", arguments={}))).text() == "builtin:read_file"
    refused = await view.call_tool(ToolCall(id="c2", name="list_dir", arguments={}))
    assert refused.is_error and refused.text() == "unknown tool 'list_dir'"
    assert [name for _, name, _ in source.calls] == ["read_file"]


async def test_filtered_view_none_is_everything_and_empty_is_nothing() -> None:
    registry = ToolRegistry([FakeToolset("builtin", "a", "b")])
    assert [spec.name for spec in await registry.filtered(None).list_tools()] == ["a", "b"]
    assert await registry.filtered([]).list_tools() == []
    assert (await registry.filtered([]).call_tool(ToolCall(id="c1", name="a", arguments={}))).is_error


async def test_registry_over_the_workspace_tools(tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("hi\n")
    registry = ToolRegistry([WorkspaceToolset(tmp_path, read_max_bytes=100, search_max_matches=10)])
    result = await registry.call_tool(ToolCall(id="c1", name="read_file", arguments={"path": "hello.txt"}))
    assert not result.is_error and result.text() == "hi\n" and result.duration_s > 0
    escaped = await registry.call_tool(ToolCall(id="c2", name="read_file", arguments={"path": "../x"}))
    assert escaped.is_error and escaped.text() == "path '../x' is outside the workspace"


class CountingToolset(FakeToolset):
    def __init__(self, source: str, *names: str) -> None:
        super().__init__(source, *names)
        self.listings = 0

    async def list_tools(self) -> list[ToolSpec]:
        self.listings += 1
        return await super().list_tools()


async def test_routes_come_from_the_listing_and_only_an_unknown_name_lists_again() -> None:
    counting = CountingToolset("builtin", "a")
    view = ToolRegistry([counting]).filtered(["a", "b"])
    await view.list_tools()
    assert (await view.call_tool(ToolCall(id="c1", name="a", arguments={}))).text() == "builtin:a"
    assert counting.listings == 1
    counting.names.append("b")
    assert (await view.call_tool(ToolCall(id="c2", name="b", arguments={}))).text() == "builtin:b"
    assert counting.listings == 2
    assert (await view.call_tool(ToolCall(id="c3", name="c", arguments={}))).text() == "unknown tool 'c'"
    assert counting.listings == 3


async def test_a_filtered_view_shares_the_merge_and_its_dropped_tools() -> None:
    registry = ToolRegistry([FakeToolset("builtin", "a"), FakeToolset("plugin", "a", "b")])
    view = registry.filtered(["b"])
    assert [spec.name for spec in await view.list_tools()] == ["b"]
    assert (
        registry.dropped()
        == view.dropped()
        == [DroppedTool(name="a", source="plugin", reason="its name is already taken by the tool from 'builtin'")]
    )


async def test_an_exception_result_is_timed_like_any_other(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks: Iterator[float] = iter([1.0, 1.25])
    registry = ToolRegistry([RaisingToolset("plugin", "explode")])
    await registry.list_tools()
    monkeypatch.setattr("agent_server.tools.registry.time.perf_counter", lambda: next(ticks))
    result = await registry.call_tool(ToolCall(id="c1", name="explode", arguments={}))
    assert result.is_error and result.duration_s == 0.25
