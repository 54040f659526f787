"""MountManager with in-process fake servers, in both protocol eras: listing, naming, filtering,
collisions, results, progress coalescing, list changes, cancellation, timeouts and states."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from agent_server.errors import ConfigError
from agent_server.mounts.toolset import MountManager
from agent_server.types import ImagePart, TextPart
from tests.fakes import mcp_echo, mcp_paged
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
        result = await manager.call_tool("c1", "e_x__add", {"a": 2, "b": 3})
        assert (result.is_error, result.text(), result.structured) == (False, "5", {"result": 5})
        for hidden in ("e_x__env", "e_x__crash", "echo__echo"):
            refused = await manager.call_tool("c2", hidden, {})
            assert refused.is_error and f"unknown tool {hidden!r}" in refused.text()


@pytest.mark.parametrize("mode", MODES)
async def test_paginated_tool_lists_are_read_whole(mode: str) -> None:
    async with mounted([in_process("paged")], {"paged": mcp_paged.build()}, mode=mode) as manager:
        tools = await manager.list_tools()
        assert [t.name for t in tools] == [f"paged__t{i}" for i in range(5)]
        assert tools[4].description == "Tool 4"  # the title when there is no description
        result = await manager.call_tool("c", "paged__t4", {"x": 7})
        assert result.text() == "t4:7"


@pytest.mark.parametrize("mode", MODES)
async def test_results_keep_text_images_structured_content_and_errors(mode: str) -> None:
    async with mounted([in_process("echo")], {"echo": mcp_echo.build()}, mode=mode) as manager:
        image = await manager.call_tool("c1", "echo__image", {})
        assert image.content == [
            TextPart(text="a red dot"),
            ImagePart(data=mcp_echo.TINY_PNG, mime_type="image/png"),
        ]
        assert image.structured == {"width": 1, "height": 1}
        assert (image.call_id, image.name, image.is_error) == ("c1", "echo__image", False)
        failed = await manager.call_tool("c2", "echo__fail", {"message": "no such file"})
        assert failed.is_error and "no such file" in failed.text()
        invalid = await manager.call_tool("c3", "echo__add", {"a": "x"})
        assert invalid.is_error  # the server's own argument validation, as data


async def test_tool_name_collisions_between_servers_name_both() -> None:
    odd = MCPServer("odd", log_level="WARNING")

    @odd.tool(name="echo__echo")
    async def clash() -> str:  # pyright: ignore[reportUnusedFunction]
        return "clash"

    # prefixes "x" and "x__echo" differ, but "x" + "echo__echo" and "x__echo" + "echo" do not
    configs = [in_process("a", prefix="x"), in_process("b", prefix="x__echo", include=["echo"])]
    async with mounted(configs, {"a": odd, "b": mcp_echo.build()}) as manager:
        with pytest.raises(ConfigError) as err:
            await manager.list_tools()
        assert "'x__echo__echo'" in err.value.message
        assert "'mcp:a'" in err.value.message and "'mcp:b'" in err.value.message
        result = await manager.call_tool("c", "x__echo__echo", {})
        assert result.is_error and "offered twice" in result.text()


def test_clashing_prefixes_and_duplicate_names_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"'a\.b' and 'a_b'"):
        MountManager([in_process("a.b"), in_process("a_b")])
    with pytest.raises(ConfigError, match="'fs' and 'files'"):
        MountManager([in_process("fs"), in_process("files", prefix="fs")])
    with pytest.raises(ConfigError, match="configured twice"):
        MountManager([in_process("fs"), in_process("fs")])
    MountManager([in_process("fs"), in_process("files", prefix="fs", enabled=False)])  # disabled: no clash


@pytest.mark.parametrize("mode", MODES)
async def test_a_burst_of_progress_is_coalesced_and_ends_with_the_final_value(mode: str) -> None:
    progress = Progress(delay=0.01)  # a slow consumer must not hold the connection up either
    async with mounted([in_process("echo")], {"echo": mcp_echo.build()}, mode=mode) as manager:
        started = time.perf_counter()
        result = await manager.call_tool("c", "echo__burst", {"n": 5000}, on_progress=progress)
        elapsed = time.perf_counter() - started
    assert result.text() == "5000"
    assert progress.updates[-1] == (5000, 5000, "tick 5000")
    assert len(progress.updates) <= 2 + elapsed / 0.1, (len(progress.updates), elapsed)
    assert [p for p, _, _ in progress.updates] == sorted(p for p, _, _ in progress.updates)


@pytest.mark.parametrize("mode", MODES)
async def test_spaced_progress_is_forwarded_live(mode: str) -> None:
    progress = Progress()
    async with mounted([in_process("echo")], {"echo": mcp_echo.build()}, mode=mode) as manager:
        result = await manager.call_tool("c", "echo__slow", {"steps": 3, "delay": 0.15}, on_progress=progress)
    assert result.text() == "done 3 steps"
    assert progress.updates == [(1, 3, "step 1/3"), (2, 3, "step 2/3"), (3, 3, "step 3/3")]


@pytest.mark.parametrize("mode", MODES)
async def test_tools_list_changed_refreshes_the_tools(mode: str) -> None:
    async with mounted([in_process("echo")], {"echo": mcp_echo.build()}, mode=mode) as manager:
        connection = manager.connections["echo"]
        updated = connection.tools_updated
        assert "echo__extra" not in {t.name for t in await manager.list_tools()}
        assert (await manager.call_tool("c1", "echo__grow", {})).text() == "grown"
        with anyio.fail_after(5):
            await updated.wait()
        assert "echo__extra" in {t.name for t in await manager.list_tools()}
        assert (await manager.call_tool("c2", "echo__extra", {})).text() == "extra!"
        assert manager.states()[0]["tool_count"] == 13


@pytest.mark.parametrize("mode", MODES)
async def test_cancelling_the_outer_call_cancels_the_mounted_call(mode: str, tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"
    async with mounted([in_process("echo")], {"echo": mcp_echo.build()}, mode=mode) as manager:
        with anyio.move_on_after(0.3) as scope:
            await manager.call_tool("c", "echo__sleep", {"seconds": 30, "marker": str(marker)})
        assert scope.cancelled_caught
        await poll_until(lambda: written(marker) == "cancelled")  # the handler's cleanup runs in its own task
        assert (await manager.call_tool("c2", "echo__echo", {"text": "still fine"})).text() == "still fine"


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_past_its_timeout_is_an_error_result(mode: str) -> None:
    async with mounted([in_process("echo", timeout_s=0.3)], {"echo": mcp_echo.build()}, mode=mode) as manager:
        started = time.perf_counter()
        result = await manager.call_tool("c", "echo__sleep", {"seconds": 30})
        elapsed = time.perf_counter() - started
        assert result.is_error and "timed out" in result.text() and "0.3 s" in result.text()
        assert 0.25 < elapsed < 2
        assert manager.states()[0]["state"] == "ready"
        assert (await manager.call_tool("c2", "echo__echo", {"text": "ok"})).text() == "ok"


async def test_run_in_a_task_group() -> None:
    manager = MountManager([in_process("echo")], in_process={"echo": mcp_echo.build()})
    async with anyio.create_task_group() as tg:
        await tg.start(manager.run)
        with anyio.fail_after(10):
            await manager.wait_started()
        assert (await manager.call_tool("c", "echo__echo", {"text": "hi"})).text() == "hi"
        tg.cancel_scope.cancel()
    assert manager.states()[0]["state"] == "stopped"
    result = await manager.call_tool("c", "echo__echo", {"text": "hi"})
    assert result.is_error  # after shutdown: its tools are gone
