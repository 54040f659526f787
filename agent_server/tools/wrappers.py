"""Toolsets made from another toolset (after pydantic-ai's wrapper toolsets): filtered (`ToolRegistry.filtered`)
and renamed (each mounted server's prefix, `MountManager`)."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable

from agent_server.tools.base import ProgressCallback, Toolset, drops_tools, unknown_tool
from agent_server.types import DroppedTool, ToolCall, ToolResult, ToolSpec


class FilteredToolset:
    """The tools of `inner` whose names match one of the fnmatch globs `patterns` (None: every tool), and one of
    `also`'s (a second allow-list, e.g. a named agent's under the caller's; None: no second one).

    Implements `Toolset`; a call of a name it does not offer is answered as unknown, never passed on.
    """

    def __init__(self, inner: Toolset, patterns: tuple[str, ...] | None, also: tuple[str, ...] | None = None) -> None:
        self._inner = inner
        self._lists = [p for p in (patterns, also) if p is not None]

    def allows(self, name: str) -> bool:
        return all(any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns) for patterns in self._lists)

    async def list_tools(self) -> list[ToolSpec]:
        return [spec for spec in await self._inner.list_tools() if self.allows(spec.name)]

    def route(self, name: str) -> Toolset | None:
        return self._inner if self.allows(name) else None

    async def call_tool(self, call: ToolCall, *, on_progress: ProgressCallback | None = None) -> ToolResult:
        if not self.allows(call.name):
            return unknown_tool(call)
        return await self._inner.call_tool(call, on_progress=on_progress)


class PrefixedToolset:
    """The tools of `inner` under new names (`rename(name)`, e.g. a mounted server's `<prefix>__<tool>`).

    Implements `Toolset` and `DropsTools`. A call is passed on under the inner name and its result comes
    back under the outer one. When two inner names rename alike (after sanitising), the first keeps the
    name and the other is dropped with the reason. The renaming is redone only when `inner` lists a new
    list object, so a toolset that returns the same list while nothing changed costs one identity check.
    It has no `route()` on purpose: the outer name is only understood here.
    """

    def __init__(self, inner: Toolset, rename: Callable[[str], str]) -> None:
        self._inner = inner
        self._rename = rename
        self._listed: list[ToolSpec] | None = None
        self._specs: list[ToolSpec] = []
        self._inner_names: dict[str, str] = {}
        self._dropped: list[DroppedTool] = []

    async def list_tools(self) -> list[ToolSpec]:
        return self.offer(await self._inner.list_tools())

    def offer(self, listed: list[ToolSpec]) -> list[ToolSpec]:
        """Offer `listed` (what `inner` lists now) renamed; for owners that know `inner`'s tools synchronously."""
        if listed is not self._listed:
            self._listed = listed
            self._specs, self._inner_names, self._dropped = self._renamed(listed)
        return self._specs

    def inner_name(self, name: str) -> str | None:
        """The inner name of the tool offered as `name` (as of the last `list_tools()`)."""
        return self._inner_names.get(name)

    def dropped(self) -> list[DroppedTool]:
        inner = self._inner.dropped() if drops_tools(self._inner) else []
        return [d.model_copy(update={"name": self._rename(d.name)}) for d in inner] + self._dropped

    async def call_tool(self, call: ToolCall, *, on_progress: ProgressCallback | None = None) -> ToolResult:
        inner_name = self._inner_names.get(call.name)
        if inner_name is None:
            return unknown_tool(call)
        inner_call = call.model_copy(update={"name": inner_name})
        result = await self._inner.call_tool(inner_call, on_progress=on_progress)
        return result.model_copy(update={"name": call.name})

    def _renamed(self, listed: list[ToolSpec]) -> tuple[list[ToolSpec], dict[str, str], list[DroppedTool]]:
        specs: list[ToolSpec] = []
        inner_names: dict[str, str] = {}
        dropped: list[DroppedTool] = []
        for spec in listed:
            name = self._rename(spec.name)
            first = inner_names.get(name)
            if first is not None:
                reason = f"its tool {spec.name!r}: the name is already taken by {spec.source!r} (its tool {first!r})"
                dropped.append(DroppedTool(name=name, source=spec.source, reason=reason))
                continue
            inner_names[name] = spec.name
            specs.append(spec.model_copy(update={"name": name}))
        return specs, inner_names, dropped
