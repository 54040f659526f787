"""Mounted results are bounded (`mount_result_max_bytes`): text, images and structured content."""

from __future__ import annotations

import json

import mcp_types as types
import pytest
from mcp.server.mcpserver import MCPServer

from agent_server.mounts.toolset import to_tool_result
from agent_server.types import ImagePart, TextPart, ToolCall
from tests.unit.mounts.helpers import in_process, mounted

LIMIT = 4096


def result(*content: types.ContentBlock, structured: dict[str, object] | None = None) -> types.CallToolResult:
    return types.CallToolResult(content=list(content), structured_content=structured)


def texts(parts: list[TextPart | ImagePart]) -> list[str]:
    return [p.text for p in parts if isinstance(p, TextPart)]


def test_a_small_result_is_unchanged() -> None:
    out = to_tool_result("c", "t", result(types.TextContent(text="hi"), structured={"a": 1}), max_bytes=LIMIT)
    assert texts(out.content) == ["hi"] and out.structured == {"a": 1}


def test_long_text_is_cut_with_a_note_saying_what_was_cut() -> None:
    out = to_tool_result("c", "t", result(types.TextContent(text="x" * 20_000_000)), max_bytes=LIMIT)
    kept, note = texts(out.content)
    assert kept == "x" * LIMIT
    assert "text of 20000000 characters cut to its first 4096" in note and "mount_result_max_bytes" in note


def test_the_budget_is_shared_by_the_parts_and_counts_utf8_bytes() -> None:
    blocks = [types.TextContent(text="é" * 1500), types.TextContent(text="ü" * 1500), types.TextContent(text="z")]
    out = to_tool_result("c", "t", result(*blocks), max_bytes=LIMIT)
    kept = texts(out.content)[:-1]
    assert sum(len(t.encode()) for t in kept) <= LIMIT
    assert kept[0] == "é" * 1500 and kept[1].startswith("ü") and len(kept) == 2  # "z" did not fit


def test_large_structured_content_is_dropped_and_its_text_kept_within_the_cap() -> None:
    structured = {"rows": ["row"] * 10_000}
    out = to_tool_result("c", "t", result(structured=structured), max_bytes=LIMIT)
    assert out.structured is None
    text, note = texts(out.content)
    assert text == json.dumps(structured)[:LIMIT]
    assert f"structured content of {len(json.dumps(structured))} bytes dropped" in note


def test_an_image_over_what_is_left_is_dropped() -> None:
    image = types.ImageContent(data="A" * 10_000, mime_type="image/png")
    out = to_tool_result("c", "t", result(types.TextContent(text="caption"), image), max_bytes=LIMIT)
    assert not any(isinstance(p, ImagePart) for p in out.content)
    assert "an image of 10000 bytes (base64) dropped" in texts(out.content)[-1]


@pytest.mark.anyio
async def test_a_mounted_call_is_capped_by_the_managers_setting() -> None:
    server = MCPServer("big", version="1.0.0", log_level="WARNING")

    @server.tool(description="A lot of text")
    async def flood(size: int) -> str:
        return "y" * size

    async with mounted([in_process("big")], {"big": server}, result_max_bytes=LIMIT) as manager:
        out = await manager.call_tool(ToolCall(id="c1", name="big__flood", arguments={"size": 5_000_000}))
    assert not out.is_error
    assert sum(len(t) for t in texts(out.content)) < LIMIT + 200
