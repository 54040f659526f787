"""Every bad-argument path gives an isError result with a clear message, and the server goes on."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from mcp import MCPError

from tests.interaction.harness import MODES, connect
from tests.pg import fresh_schema

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("mode", MODES)]

BAD_CALLS: list[tuple[str, dict[str, Any], str, str]] = [
    ("run_turn", {}, "invalid_argument", "prompt"),
    ("run_turn", {"prompt": ""}, "invalid_argument", "prompt"),
    ("run_turn", {"prompt": "   \n"}, "invalid_argument", "blank"),
    ("run_turn", {"prompt": "x", "session_id": "ses_nope"}, "session_not_found", "ses_nope"),
    ("run_turn", {"prompt": "x", "max_tool_passes": -1}, "invalid_argument", "max_tool_passes"),
    ("run_turn", {"prompt": "x", "max_tool_passes": 5000}, "invalid_argument", "max_tool_passes"),
    ("run_turn", {"prompt": "x", "timeout_s": 0}, "invalid_argument", "timeout_s"),
    ("run_turn", {"prompt": "x", "trace": "verbose"}, "invalid_argument", "trace"),
    ("run_turn", {"prompt": "x", "bogus": 1}, "invalid_argument", "unknown argument"),
    ("compact", {"session_id": "ses_nope"}, "session_not_found", "ses_nope"),
    ("compact", {"keep_last": -1}, "invalid_argument", "keep_last"),
    ("compact", {}, "invalid_argument", "no current session"),
    ("session_list", {"limit": 0}, "invalid_argument", "limit"),
    ("session_list", {"limit": 201}, "invalid_argument", "limit"),
    ("session_list", {"cursor": "not-a-cursor"}, "invalid_argument", "cursor"),
    ("session_get", {"session_id": "ses_nope"}, "session_not_found", "ses_nope"),
    ("session_get", {}, "invalid_argument", "no current session"),
    ("session_get", {"session_id": "ses_nope", "turns_limit": 1000}, "invalid_argument", "turns_limit"),
    ("session_switch", {"session_id": "ses_nope"}, "session_not_found", "ses_nope"),
    ("session_switch", {}, "invalid_argument", "session_id"),
    ("session_fork", {"session_id": "ses_nope"}, "session_not_found", "ses_nope"),
    ("session_delete", {"session_id": "ses_nope"}, "session_not_found", "ses_nope"),
    ("session_create", {"title": "x" * 201}, "invalid_argument", "title"),
    ("agent_tools", {"extra": True}, "invalid_argument", "unknown argument"),
]


@pytest.mark.parametrize(("tool", "arguments", "error_type", "mentions"), BAD_CALLS)
async def test_bad_arguments_are_error_results(
    tmp_path: Path, mode: str, tool: str, arguments: dict[str, Any], error_type: str, mentions: str
) -> None:
    async with connect(tmp_path, [{"content": "still alive"}], mode=mode) as h:
        result = await h.call(tool, arguments)
        alive = await h.call("run_turn", {"prompt": "are you there?"})
    assert result.is_error is True
    assert result.structured_content["error"]["type"] == error_type
    assert mentions in result.content[0].text
    assert alive.structured_content["final_text"] == "still alive"


async def test_fork_at_an_unknown_turn_is_an_error(tmp_path: Path, mode: str) -> None:
    async with connect(tmp_path, [{"content": "a"}], mode=mode) as h:
        await h.call("run_turn", {"prompt": "x"})
        result = await h.call("session_fork", {"at_turn": "turn_nope"})
    assert result.is_error is True
    assert result.structured_content["error"]["type"] == "turn_not_found"


async def test_unknown_tool_is_a_protocol_error(tmp_path: Path, mode: str) -> None:
    async with connect(tmp_path, mode=mode) as h:
        with pytest.raises(MCPError) as caught:
            await h.call("no_such_tool")
        tools = await h.client.list_tools()
    assert caught.value.code == -32602
    assert len(tools.tools) == 12


async def test_every_tool_lists_input_and_output_schemas(tmp_path: Path, mode: str) -> None:
    async with connect(tmp_path, mode=mode) as h:
        tools = (await h.client.list_tools()).tools
    names = {t.name for t in tools}
    assert names == {
        "run_turn",
        "turn_get",
        "turn_wait",
        "turn_cancel",
        "compact",
        "session_create",
        "session_list",
        "session_get",
        "session_switch",
        "session_fork",
        "session_delete",
        "agent_tools",
    }
    for tool in tools:
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        assert tool.description


async def test_every_tool_carries_annotations_hosts_can_gate_on(tmp_path: Path, mode: str) -> None:
    async with connect(tmp_path, mode=mode) as h:
        tools = {t.name: t for t in (await h.client.list_tools()).tools}
    hints = {
        name: (t.annotations.read_only_hint, t.annotations.destructive_hint, t.annotations.open_world_hint)
        for name, t in tools.items()
        if t.annotations is not None and t.annotations.title
    }
    assert hints.keys() == tools.keys()
    read_only = {name for name, (ro, _, _) in hints.items() if ro}
    assert read_only == {"session_list", "session_get", "agent_tools", "turn_get", "turn_wait"}
    assert {name for name, (_, destructive, _) in hints.items() if destructive} == {"session_delete"}
    assert hints["run_turn"] == (False, False, True)
    assert "session_id" in tools["run_turn"].description and "`new`" in tools["run_turn"].description


async def test_a_state_dir_that_is_a_file_is_a_store_error(tmp_path: Path, mode: str) -> None:
    (tmp_path / "state").write_text("not a directory")
    async with connect(tmp_path, [{"content": "unused"}], mode=mode) as h:
        results = [await h.call("run_turn", {"prompt": "x"}), await h.call("session_list")]
    for result in results:
        assert result.is_error is True
        assert result.structured_content["error"]["type"] == "store_error"
        message = result.content[0].text
        assert "cannot open the session store" in message and "not a directory" in message
        assert "Errno" not in message


MALFORMED_IDS = ["ses_\x00nul", "ses_\x1b[2J", "ses one", "ses_\u200bzero", "s" * 129, "x" * 100_000, ""]
ID_CALLS: list[tuple[str, str]] = [
    ("run_turn", "session_id"),
    ("session_get", "session_id"),
    ("session_switch", "session_id"),
    ("session_fork", "session_id"),
    ("session_fork", "at_turn"),
    ("session_delete", "session_id"),
    ("compact", "session_id"),
    ("turn_get", "turn_id"),
    ("turn_get", "session_id"),
    ("turn_wait", "turn_id"),
    ("turn_cancel", "turn_id"),
]


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
async def test_a_malformed_id_is_an_invalid_argument_on_every_store(tmp_path: Path, mode: str, store: str) -> None:
    with contextlib.ExitStack() as stack:
        store_url = stack.enter_context(fresh_schema()) if store == "postgres" else None
        async with connect(tmp_path, [{"content": "still alive"}], mode=mode, store_url=store_url) as h:
            session = (await h.call("session_create", {})).structured_content["session_id"]
            valid = {"prompt": "x", "session_id": session, "turn_id": "turn_0123456789abcdef"}
            results: list[tuple[str, str, Any]] = []
            for tool, field in ID_CALLS:
                needed = {"run_turn": ["prompt", "session_id"], "session_fork": ["session_id"]}.get(tool, [])
                base = {k: valid[k] for k in ("turn_id", *needed) if k in needed or tool.startswith("turn_")}
                for bad in MALFORMED_IDS:
                    results.append((f"{tool}.{field}", bad, await h.call(tool, {**base, field: bad})))
            alive = await h.call("run_turn", {"prompt": "are you there?", "session_id": session})
    for where, bad, result in results:
        text = result.content[0].text
        assert result.is_error is True, (where, bad[:20])
        assert result.structured_content["error"]["type"] == "invalid_argument", (where, text)
        field = where.split(".")[1]
        assert (f"malformed {field}" if bad else field) in text, (where, text)
        assert "\x00" not in text and len(text) < 400
    assert alive.structured_content["final_text"] == "still alive"
