"""Wrapper toolsets: a renamed (prefixed) view of another toolset."""

from __future__ import annotations

import pytest

from agent_server.tools.base import ProgressCallback
from agent_server.tools.wrappers import PrefixedToolset
from agent_server.types import DroppedTool, TextPart, ToolCall, ToolResult, ToolSpec

pytestmark = pytest.mark.anyio


class Inner:
    """Offers `names` (the same list object until `names` is replaced); a call answers its own name."""

    def __init__(self, *names: str) -> None:
        self.set(*names)
        self.calls: list[str] = []

    def set(self, *names: str) -> None:
        self.listed = [ToolSpec(name=name, source="mcp:s") for name in names]

    async def list_tools(self) -> list[ToolSpec]:
        return self.listed

    def dropped(self) -> list[DroppedTool]:
        return [DroppedTool(name="bad", source="mcp:s", reason="its tool 'bad': its input schema is invalid")]

    async def call_tool(self, call: ToolCall, *, on_progress: ProgressCallback | None = None) -> ToolResult:
        self.calls.append(call.name)
        return ToolResult(call_id=call.id, name=call.name, content=[TextPart(text=f"ran {call.name}")])


def _prefix(name: str) -> str:
    return "p__" + name.replace(".", "_")


async def test_tools_are_offered_and_called_under_the_new_names() -> None:
    inner = Inner("read", "write")
    prefixed = PrefixedToolset(inner, _prefix)
    assert [spec.name for spec in await prefixed.list_tools()] == ["p__read", "p__write"]
    result = await prefixed.call_tool(ToolCall(id="c1", name="p__write"))
    assert (inner.calls, result.name, result.text()) == (["write"], "p__write", "ran write")
    assert prefixed.inner_name("p__read") == "read"


async def test_an_inner_name_is_not_callable_from_outside() -> None:
    inner = Inner("read")
    prefixed = PrefixedToolset(inner, _prefix)
    await prefixed.list_tools()
    refused = await prefixed.call_tool(ToolCall(id="c1", name="read"))
    assert refused.is_error and "unknown tool 'read'" in refused.text() and inner.calls == []


async def test_names_that_rename_alike_keep_the_first_and_drop_the_other_with_the_reason() -> None:
    prefixed = PrefixedToolset(Inner("a.b", "a_b"), _prefix)
    assert [spec.name for spec in await prefixed.list_tools()] == ["p__a_b"]
    assert prefixed.dropped() == [
        DroppedTool(name="p__bad", source="mcp:s", reason="its tool 'bad': its input schema is invalid"),
        DroppedTool(
            name="p__a_b",
            source="mcp:s",
            reason="its tool 'a_b': the name is already taken by 'mcp:s' (its tool 'a.b')",
        ),
    ]


async def test_the_renaming_is_redone_only_when_the_inner_list_changes() -> None:
    inner = Inner("read")
    prefixed = PrefixedToolset(inner, _prefix)
    first = await prefixed.list_tools()
    assert await prefixed.list_tools() is first  # the same inner list: nothing renamed again
    inner.set("read", "grep")
    assert [spec.name for spec in await prefixed.list_tools()] == ["p__read", "p__grep"]
    assert (await prefixed.call_tool(ToolCall(id="c1", name="p__grep"))).text() == "ran grep"
