"""MountManager with in-process fake servers, in both protocol eras: listing, naming, filtering,
collisions, results, progress coalescing, list changes, cancellation, timeouts and states."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from agent_server.errors import ConfigError
from agent_server.mounts.toolset import MountManager
from agent_server.types import DroppedTool, ImagePart, TextPart, ToolCall
from tests.fakes import mcp_echo, mcp_listed, mcp_paged
from tests.fakes.mcp_listed import tool
from tests.unit.mounts.helpers import Progress, in_process, mounted, poll_until, written

pytestmark = pytest.mark.anyio
MODES = ["auto", "legacy"]


async def test_entering_returns_at_once_and_states_follow_startup() -> None:
    manager = MountManager(
        [in_process("echo"), in_process("off", enabled=False)], in_process={"echo": mcp_echo.build()}
    )
    async with manager:
        assert [s["state"] for s in manager.states()] == ["starting", "stopped"]
        assert await manager.list_tools() == []
        assert manager.unavailable() == [("echo", "still starting")]
        with anyio.fail_after(10):
            await manager.wait_started()
        echo, off = manager.states()
        assert echo == {"name": "echo", "transport": "stdio", "state": "ready", "error": None, "tool_count": 12}
        assert off == {
            "name": "off",
            "transport": "stdio",
            "state": "stopped",
            "error": "disabled in the configuration",
            "tool_count": 0,
        }
        assert manager.unavailable() == []  # a disabled server is not "unavailable"
    assert [s["state"] for s in manager.states()] == ["stopped", "stopped"]


@pytest.mark.parametrize("mode", MODES)
async def test_tools_are_prefixed_filtered_and_described(mode: str) -> None:
    config = in_process("echo", prefix="e.x", include=["e*", "add", "image"], exclude=["env"])
    async with mounted([config], {"echo": mcp_echo.build()}, mode=mode) as manager:
        tools = {spec.name: spec for spec in await manager.list_tools()}
        assert sorted(tools) == ["e_x__add", "e_x__echo", "e_x__image"]
        add = tools["e_x__add"]
        assert (add.description, add.source) == ("Add two integers", "mcp:echo")
        assert add.input_schema["properties"].keys() == {"a", "b"}
        assert manager.states()[0]["tool_count"] == 3
        result = await manager.call_tool(ToolCall(id="c1", name="e_x__add", arguments={"a": 2, "b": 3}))
        assert (result.is_error, result.text(), result.structured) == (False, "5", {"result": 5})
        for hidden in ("e_x__env", "e_x__crash", "echo__echo"):
            refused = await manager.call_tool(ToolCall(id="c2", name=hidden, arguments={}))
            assert refused.is_error and f"unknown tool {hidden!r}" in refused.text()


@pytest.mark.parametrize("mode", MODES)
async def test_paginated_tool_lists_are_read_whole(mode: str) -> None:
    async with mounted([in_process("paged")], {"paged": mcp_paged.build()}, mode=mode) as manager:
        tools = await manager.list_tools()
        assert [t.name for t in tools] == [f"paged__t{i}" for i in range(5)]
        assert tools[4].description == "Tool 4"  # the title when there is no description
        result = await manager.call_tool(ToolCall(id="c", name="paged__t4", arguments={"x": 7}))
        assert result.text() == "t4:7"


@pytest.mark.parametrize("mode", MODES)
async def test_results_keep_text_images_structured_content_and_errors(mode: str) -> None:
    async with mounted([in_process("echo")], {"echo": mcp_echo.build()}, mode=mode) as manager:
        image = await manager.call_tool(ToolCall(id="c1", name="echo__image", arguments={}))
        assert image.content == [
            TextPart(text="a red dot"),
            ImagePart(data=mcp_echo.TINY_PNG, mime_type="image/png"),
        ]
        assert image.structured == {"width": 1, "height": 1}
        assert (image.call_id, image.name, image.is_error) == ("c1", "echo__image", False)
        failed = await manager.call_tool(ToolCall(id="c2", name="echo__fail", arguments={"message": "no such file"}))
        assert failed.is_error and "no such file" in failed.text()
        invalid = await manager.call_tool(ToolCall(id="c3", name="echo__add", arguments={"a": "x"}))
        assert invalid.is_error  # the server's own argument validation, as data


async def test_tools_whose_names_clash_after_sanitising_are_dropped_the_rest_still_work() -> None:
    server = mcp_listed.build([tool("a.b"), tool("a_b"), tool("other")])
    async with mounted([in_process("h")], {"h": server}) as manager:
        tools = {spec.name: spec for spec in await manager.list_tools()}
        assert sorted(tools) == ["h__a_b", "h__other"]
        assert tools["h__a_b"].description == "tool a.b"  # the first one offered keeps the name
        assert manager.dropped() == [
            DroppedTool(
                name="h__a_b",
                source="mcp:h",
                reason="its tool 'a_b': the name is already taken by 'mcp:h' (its tool 'a.b')",
            )
        ]
        assert (await manager.call_tool(ToolCall(id="c1", name="h__a_b", arguments={}))).text() == "a.b"
        assert (await manager.call_tool(ToolCall(id="c2", name="h__other", arguments={}))).text() == "other"
        assert manager.states()[0]["tool_count"] == 2


async def test_nested_prefixes_drop_only_the_later_servers_clashing_tool() -> None:
    # prefixes "h" and "h__x" differ, but "h" + "x__y" and "h__x" + "y" do not
    first = mcp_listed.build([tool("x__y")])
    second = mcp_listed.build([tool("y"), tool("z")])
    configs = [in_process("a", prefix="h"), in_process("b", prefix="h__x")]
    async with mounted(configs, {"a": first, "b": second}) as manager:
        assert sorted(spec.name for spec in await manager.list_tools()) == ["h__x__y", "h__x__z"]
        (dropped,) = manager.dropped()
        assert (dropped.name, dropped.source) == ("h__x__y", "mcp:b")
        assert "'mcp:a' (its tool 'x__y')" in dropped.reason
        assert (await manager.call_tool(ToolCall(id="c1", name="h__x__y", arguments={}))).text() == "x__y"
        assert (await manager.call_tool(ToolCall(id="c2", name="h__x__z", arguments={}))).text() == "z"
        assert [s["tool_count"] for s in manager.states()] == [1, 1]


async def test_servers_with_clashing_prefixes_both_run_and_only_duplicate_names_are_errors() -> None:
    configs = [in_process("a.b"), in_process("a_b")]
    servers = {"a.b": mcp_listed.build([tool("same"), tool("one")]), "a_b": mcp_listed.build([tool("same")])}
    async with mounted(configs, servers) as manager:
        assert sorted(spec.name for spec in await manager.list_tools()) == ["a_b__one", "a_b__same"]
        assert [(d.name, d.source) for d in manager.dropped()] == [("a_b__same", "mcp:a_b")]
    with pytest.raises(ConfigError, match="configured twice"):
        MountManager([in_process("fs"), in_process("fs")])


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"type": "object", "properties": {"n": {"type": "no-such-type"}}}, "at properties/n/type"),
        ({"type": "object", "required": "n"}, "at required: 'n' is not of type 'array'"),
        ({"type": "object", "properties": {"n": {"minLength": -1}}}, "at properties/n/minLength"),
    ],
)
async def test_a_tool_with_an_invalid_input_schema_is_dropped_with_the_reason(
    schema: dict[str, object], why: str
) -> None:
    server = mcp_listed.build([tool("bad", schema), tool("good")])
    async with mounted([in_process("s")], {"s": server}) as manager:
        assert [spec.name for spec in await manager.list_tools()] == ["s__good"]
        (dropped,) = manager.dropped()
        assert (dropped.name, dropped.source) == ("s__bad", "mcp:s")
        assert dropped.reason.startswith("its tool 'bad': its input schema ") and why in dropped.reason
        refused = await manager.call_tool(ToolCall(id="c", name="s__bad", arguments={}))
        assert refused.is_error and "unknown tool 's__bad'" in refused.text()


@pytest.mark.parametrize("mode", MODES)
async def test_a_burst_of_progress_is_coalesced_and_ends_with_the_final_value(mode: str) -> None:
    progress = Progress(delay=0.01)  # a slow consumer must not hold the connection up either
    async with mounted([in_process("echo")], {"echo": mcp_echo.build()}, mode=mode) as manager:
        started = time.perf_counter()
        result = await manager.call_tool(
            ToolCall(id="c", name="echo__burst", arguments={"n": 5000}), on_progress=progress
        )
        elapsed = time.perf_counter() - started
    assert result.text() == "5000"
    assert progress.updates[-1] == (5000, 5000, "tick 5000")
    assert len(progress.updates) <= 2 + elapsed / 0.1, (len(progress.updates), elapsed)
    assert [p for p, _, _ in progress.updates] == sorted(p for p, _, _ in progress.updates)


@pytest.mark.parametrize("mode", MODES)
async def test_spaced_progress_is_forwarded_live(mode: str) -> None:
    progress = Progress()
    async with mounted([in_process("echo")], {"echo": mcp_echo.build()}, mode=mode) as manager:
        result = await manager.call_tool(
            ToolCall(id="c", name="echo__slow", arguments={"steps": 3, "delay": 0.15}), on_progress=progress
        )
    assert result.text() == "done 3 steps"
    assert progress.updates == [(1, 3, "step 1/3"), (2, 3, "step 2/3"), (3, 3, "step 3/3")]


@pytest.mark.parametrize("mode", MODES)
async def test_tools_list_changed_refreshes_the_tools(mode: str) -> None:
    async with mounted([in_process("echo")], {"echo": mcp_echo.build()}, mode=mode) as manager:
        connection = manager.connections["echo"]
        updated = connection.tools_updated
        assert "echo__extra" not in {t.name for t in await manager.list_tools()}
        assert (await manager.call_tool(ToolCall(id="c1", name="echo__grow", arguments={}))).text() == "grown"
        with anyio.fail_after(5):
            await updated.wait()
        assert "echo__extra" in {t.name for t in await manager.list_tools()}
        assert (await manager.call_tool(ToolCall(id="c2", name="echo__extra", arguments={}))).text() == "extra!"
        assert manager.states()[0]["tool_count"] == 13


@pytest.mark.parametrize("mode", MODES)
async def test_cancelling_the_outer_call_cancels_the_mounted_call(mode: str, tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"
    async with mounted([in_process("echo")], {"echo": mcp_echo.build()}, mode=mode) as manager:
        with anyio.move_on_after(0.3) as scope:
            await manager.call_tool(
                ToolCall(id="c", name="echo__sleep", arguments={"seconds": 30, "marker": str(marker)})
            )
        assert scope.cancelled_caught
        await poll_until(lambda: written(marker) == "cancelled")  # the handler's cleanup runs in its own task
        assert (
            await manager.call_tool(ToolCall(id="c2", name="echo__echo", arguments={"text": "still fine"}))
        ).text() == "still fine"


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_past_its_timeout_is_an_error_result(mode: str) -> None:
    async with mounted([in_process("echo", timeout_s=0.3)], {"echo": mcp_echo.build()}, mode=mode) as manager:
        started = time.perf_counter()
        result = await manager.call_tool(ToolCall(id="c", name="echo__sleep", arguments={"seconds": 30}))
        elapsed = time.perf_counter() - started
        assert result.is_error and "timed out" in result.text() and "0.3 s" in result.text()
        assert 0.25 < elapsed < 2
        assert manager.states()[0]["state"] == "ready"
        assert (await manager.call_tool(ToolCall(id="c2", name="echo__echo", arguments={"text": "ok"}))).text() == "ok"


async def test_run_in_a_task_group() -> None:
    manager = MountManager([in_process("echo")], in_process={"echo": mcp_echo.build()})
    async with anyio.create_task_group() as tg:
        await tg.start(manager.run)
        with anyio.fail_after(10):
            await manager.wait_started()
        assert (await manager.call_tool(ToolCall(id="c", name="echo__echo", arguments={"text": "hi"}))).text() == "hi"
        tg.cancel_scope.cancel()
    assert manager.states()[0]["state"] == "stopped"
    result = await manager.call_tool(ToolCall(id="c", name="echo__echo", arguments={"text": "hi"}))
    assert result.is_error  # after shutdown: its tools are gone
