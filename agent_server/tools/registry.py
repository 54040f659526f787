"""The tool registry: merges toolsets into one `Toolset` and routes each call to its owner.

Tool names are unique across toolsets: when two offer the same name, the earlier toolset keeps it
and the later one's tool is dropped (listed by `dropped()` with the reason, logged once), so one
clash never disables the other tools. The merge is redone by every `list_tools()` (toolsets such
as mounts gain tools while running); `call_tool` routes by the last merge and merges again once
before calling a name unknown.
A toolset that raises instead of returning an error result is a bug: the call becomes an error
result for the model and the traceback goes to the log. Cancellation always propagates.
"""

from __future__ import annotations

import fnmatch
import logging
import time
from collections.abc import Sequence
from typing import Any

import anyio

from agent_server.tools.base import DropsTools, ProgressCallback, Toolset
from agent_server.types import DroppedTool, TextPart, ToolResult, ToolSpec

logger = logging.getLogger(__name__)


class ToolRegistry:
    """Several toolsets seen as one. Implements `Toolset`."""

    def __init__(self, toolsets: Sequence[Toolset]) -> None:
        self._toolsets = list(toolsets)
        self._routes: dict[str, Toolset] = {}
        self._specs: list[ToolSpec] = []
        self._dropped: list[DroppedTool] = []

    async def refresh(self) -> list[ToolSpec]:
        """Merge the toolsets' current tools; a name offered again by a later toolset is dropped there."""
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
            if isinstance(toolset, DropsTools):
                dropped += toolset.dropped()
        _log_new(self._dropped, dropped)
        self._routes, self._specs, self._dropped = routes, list(owners.values()), dropped
        return list(self._specs)

    def dropped(self) -> list[DroppedTool]:
        """The tools left out of the last merge (by this registry or by a toolset), with the reasons."""
        return list(self._dropped)

    async def list_tools(self) -> list[ToolSpec]:
        return await self.refresh()

    async def call_tool(
        self,
        call_id: str,
        name: str,
        arguments: dict[str, Any],
        *,
        on_progress: ProgressCallback | None = None,
    ) -> ToolResult:
        started = time.perf_counter()
        result = await self._dispatch(call_id, name, arguments, on_progress)
        return result.model_copy(update={"duration_s": time.perf_counter() - started})

    def filtered(self, patterns: Sequence[str] | None) -> Toolset:
        """A view offering only the tools whose names match one of the fnmatch globs (None: all)."""
        return _FilteredView(self, None if patterns is None else tuple(patterns))

    async def _dispatch(
        self, call_id: str, name: str, arguments: dict[str, Any], on_progress: ProgressCallback | None
    ) -> ToolResult:
        toolset = self._routes.get(name)
        if toolset is None:
            await self.refresh()
            toolset = self._routes.get(name)
        if toolset is None:
            return error_result(call_id, name, f"unknown tool {name!r}")
        try:
            return await toolset.call_tool(call_id, name, arguments, on_progress=on_progress)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            logger.exception("tool %r (call %s) raised instead of returning an error result", name, call_id)
            return error_result(
                call_id, name, f"tool {name!r} failed with an internal error ({type(exc).__name__}); see the server log"
            )


class _FilteredView:
    """The registry's tools whose names match any of `patterns` (None: every tool). Implements `Toolset`."""

    def __init__(self, registry: ToolRegistry, patterns: tuple[str, ...] | None) -> None:
        self._registry = registry
        self._patterns = patterns

    def allows(self, name: str) -> bool:
        return self._patterns is None or any(fnmatch.fnmatchcase(name, pattern) for pattern in self._patterns)

    async def list_tools(self) -> list[ToolSpec]:
        return [spec for spec in await self._registry.list_tools() if self.allows(spec.name)]

    async def call_tool(
        self,
        call_id: str,
        name: str,
        arguments: dict[str, Any],
        *,
        on_progress: ProgressCallback | None = None,
    ) -> ToolResult:
        if not self.allows(name):
            return error_result(call_id, name, f"unknown tool {name!r}")
        return await self._registry.call_tool(call_id, name, arguments, on_progress=on_progress)


def _log_new(before: list[DroppedTool], now: list[DroppedTool]) -> None:
    """Warn about each drop once, not at every merge."""
    for tool in now:
        if tool not in before:
            logger.warning("tool %r (%s) is not offered to the model: %s", tool.name, tool.source, tool.reason)


def error_result(call_id: str, name: str, message: str) -> ToolResult:
    """A failed call as the model sees it."""
    return ToolResult(call_id=call_id, name=name, is_error=True, content=[TextPart(text=message)])
