"""The tool registry: the toolsets merged into one, and the one place a call is run.

Tool names are unique across toolsets: when two offer the same name, the earlier toolset keeps it
and the later one's tool is dropped (listed by `dropped()` with the reason, logged once), so one
clash never disables the other tools. The merge is redone by every `list_tools()` (toolsets such
as mounts gain tools while running), and that listing resolves each offered name to the toolset that
runs it (through the merge and any filter, see `RoutesTools`): a call goes straight there. A name the
last listing did not offer makes the registry list once more (a tool that appeared since, or no
listing yet) before it answers the call as an unknown tool.

`ToolRegistry.call_tool` is where a call is timed (`ToolResult.duration_s`), where an unknown name is
answered and where a toolset that raises instead of returning an error result (a bug) becomes an
error result for the model, with the traceback in the log. Cancellation always propagates.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Sequence

import anyio

from agent_server.tools.base import (
    ProgressCallback,
    Screening,
    Toolset,
    drops_tools,
    error_result,
    routes_tools,
    screens_calls,
    unknown_tool,
)
from agent_server.tools.wrappers import FilteredToolset
from agent_server.types import DroppedTool, ToolCall, ToolResult, ToolSpec

logger = logging.getLogger(__name__)


class ToolRegistry:
    """Several toolsets seen as one, run safely. Implements `Toolset`; see the module docstring."""

    def __init__(self, toolsets: Sequence[Toolset]) -> None:
        self._combined = CombinedToolset(toolsets)
        self._offered: Toolset = self._combined
        self._routes: dict[str, Toolset | None] = {}
        """The names of the last listing -> their owner once one was called."""

    async def list_tools(self) -> list[ToolSpec]:
        specs = await self._offered.list_tools()
        # Owners are found when a name is called (few are), not for every tool at every listing.
        self._routes = {spec.name: None for spec in specs}
        return specs

    async def refresh(self) -> list[ToolSpec]:
        """The same as `list_tools()`: merge the toolsets' current tools again."""
        return await self.list_tools()

    def dropped(self) -> list[DroppedTool]:
        """The tools left out of the last merge (by the merge or by a toolset), with the reasons."""
        return self._combined.dropped()

    def filtered(self, patterns: Sequence[str] | None, also: Sequence[str] | None = None) -> ToolRegistry:
        """A registry offering only the tools whose names match one of the fnmatch globs (None: all), and one of
        `also`'s (a second allow-list; None: none).

        It shares this registry's toolsets and merge (so `dropped()` is the same for both).
        """
        view = copy.copy(self)
        view._offered = FilteredToolset(
            self._combined, None if patterns is None else tuple(patterns), None if also is None else tuple(also)
        )
        view._routes = {}
        return view

    async def call_tool(self, call: ToolCall, *, on_progress: ProgressCallback | None = None) -> ToolResult:
        owner = self._owner_of(call.name)
        if owner is None:
            await self.list_tools()
            owner = self._owner_of(call.name)
        if owner is None:
            return unknown_tool(call)
        started = time.perf_counter()
        try:
            result = await owner.call_tool(call, on_progress=on_progress)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            logger.exception("tool %r (call %s) raised instead of returning an error result", call.name, call.id)
            message = f"tool {call.name!r} failed with an internal error ({type(exc).__name__}); see the server log"
            result = error_result(call, message)
        return result.model_copy(update={"duration_s": time.perf_counter() - started})

    async def screen(self, call: ToolCall) -> Screening | None:
        """The word of the toolset that runs `call` on it (`ScreensCalls`), if that toolset screens calls."""
        owner = self._owner_of(call.name)
        return await owner.screen(call) if owner is not None and screens_calls(owner) else None

    def _owner_of(self, name: str) -> Toolset | None:
        """The toolset that runs `name`, if the last listing offered it."""
        if name not in self._routes:
            return None
        owner = self._routes[name]
        if owner is None:
            owner = self._routes[name] = _owner(self._offered, name)
        return owner


def _owner(toolset: Toolset, name: str) -> Toolset:
    """The toolset that really runs `name`, found through merges and filters."""
    while (inner := _route(toolset, name)) is not None:
        toolset = inner
    return toolset


def _route(toolset: Toolset, name: str) -> Toolset | None:
    return toolset.route(name) if routes_tools(toolset) else None


class CombinedToolset:
    """Several toolsets as one: names merged in order, a clashing later name dropped. Implements `Toolset`."""

    def __init__(self, toolsets: Sequence[Toolset]) -> None:
        self._toolsets = list(toolsets)
        self._routes: dict[str, Toolset] = {}
        self._dropped: list[DroppedTool] = []

    async def list_tools(self) -> list[ToolSpec]:
        """Merge the toolsets' current tools and route each name to its owner."""
        routes: dict[str, Toolset] = {}
        owners: dict[str, ToolSpec] = {}
        dropped: list[DroppedTool] = []
        for toolset in self._toolsets:
            for spec in await toolset.list_tools():
                first = owners.get(spec.name)
                if first is not None:
                    reason = f"its name is already taken by the tool from {first.source!r}"
                    dropped.append(DroppedTool(name=spec.name, source=spec.source, reason=reason))
                    continue
                owners[spec.name] = spec
                routes[spec.name] = toolset
            if drops_tools(toolset):
                dropped += toolset.dropped()
        _log_new(self._dropped, dropped)
        self._routes, self._dropped = routes, dropped
        return list(owners.values())

    def dropped(self) -> list[DroppedTool]:
        return list(self._dropped)

    def route(self, name: str) -> Toolset | None:
        return self._routes.get(name)

    async def call_tool(self, call: ToolCall, *, on_progress: ProgressCallback | None = None) -> ToolResult:
        owner = self._routes.get(call.name)
        if owner is None:
            return unknown_tool(call)
        return await owner.call_tool(call, on_progress=on_progress)


def _log_new(before: list[DroppedTool], now: list[DroppedTool]) -> None:
    """Warn about each drop once, not at every merge."""
    for tool in now:
        if tool not in before:
            logger.warning("tool %r (%s) is not offered to the model: %s", tool.name, tool.source, tool.reason)
