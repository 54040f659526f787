"""Toolsets made from another toolset (after pydantic-ai's wrapper toolsets). See `ToolRegistry.filtered`."""

from __future__ import annotations

import fnmatch

from agent_server.tools.base import ProgressCallback, Toolset, unknown_tool
from agent_server.types import ToolCall, ToolResult, ToolSpec


class FilteredToolset:
    """The tools of `inner` whose names match one of the fnmatch globs `patterns` (None: every tool).

    Implements `Toolset`; a call of a name it does not offer is answered as unknown, never passed on.
    """

    def __init__(self, inner: Toolset, patterns: tuple[str, ...] | None) -> None:
        self._inner = inner
        self._patterns = patterns

    def allows(self, name: str) -> bool:
        return self._patterns is None or any(fnmatch.fnmatchcase(name, pattern) for pattern in self._patterns)

    async def list_tools(self) -> list[ToolSpec]:
        return [spec for spec in await self._inner.list_tools() if self.allows(spec.name)]

    def route(self, name: str) -> Toolset | None:
        return self._inner if self.allows(name) else None

    async def call_tool(self, call: ToolCall, *, on_progress: ProgressCallback | None = None) -> ToolResult:
        if not self.allows(call.name):
            return unknown_tool(call)
        return await self._inner.call_tool(call, on_progress=on_progress)
