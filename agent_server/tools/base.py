"""The tool boundary: a `Toolset` lists tools and runs calls.

Built-in workspace tools, plugins and mounted MCP servers are all toolsets; the registry
(`registry.py`) merges them and is the one place a call is run: it times it, answers an unknown
name and turns a toolset's exception into an error result. `call_tool` never raises for a failed
call: it returns a `ToolResult` with `is_error=True` (`error_result`) that the model reads.
Cancellation propagates.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeGuard, runtime_checkable

from agent_server.types import DroppedTool, TextPart, ToolCall, ToolResult, ToolSpec

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]
"""`(progress, total, message)` reported by a tool while it runs."""


class Toolset(Protocol):
    async def list_tools(self) -> list[ToolSpec]:
        """The tools this set offers now."""
        ...

    async def call_tool(self, call: ToolCall, *, on_progress: ProgressCallback | None = None) -> ToolResult:
        """Run one call (never one whose `arguments_error` is set: the turn answers that itself).

        A failure is a `ToolResult` with `is_error=True`, never an exception.
        """
        ...


def error_result(call: ToolCall, message: str) -> ToolResult:
    """A failed call as the model sees it."""
    return ToolResult(call_id=call.id, name=call.name, is_error=True, content=[TextPart(text=message)])


def unknown_tool(call: ToolCall) -> ToolResult:
    """The answer to a call of a name the toolset does not offer."""
    return error_result(call, f"unknown tool {call.name!r}")


@dataclass(frozen=True)
class Screening:
    """A toolset's word on one call before the approval gate applies its policy (see `ScreensCalls`)."""

    refusal: str | None = None
    """Refuse the call, with this error result for the model; the user is not asked."""
    warning: str | None = None
    """Ask the user every time (whatever the policy says), with this warning in the question."""


@runtime_checkable
class ScreensCalls(Protocol):
    """A toolset with calls that no approval may allow (or only the user's own, each time): the built-in
    write tools and their protected paths (`tools.protected`)."""

    async def screen(self, call: ToolCall) -> Screening | None:
        """The word on `call` before it is approved; None: nothing to say (the policy decides)."""
        ...


@runtime_checkable
class DropsTools(Protocol):
    """A toolset that leaves some of its tools out (see `DroppedTool`) and can say which and why."""

    def dropped(self) -> list[DroppedTool]:
        """The tools left out of the last `list_tools()`."""
        ...


@runtime_checkable
class RoutesTools(Protocol):
    """A toolset made of other toolsets (merged, filtered) that can say which one runs a tool it listed."""

    def route(self, name: str) -> Toolset | None:
        """The toolset that runs `name` as of the last `list_tools()`; None when `name` is not offered."""
        ...


def drops_tools(toolset: object) -> TypeGuard[DropsTools]:
    """`isinstance(toolset, DropsTools)`, decided once per class (a runtime protocol check costs ~10 us a call)."""
    return _has_protocol(type(toolset), DropsTools)


def screens_calls(toolset: object) -> TypeGuard[ScreensCalls]:
    """`isinstance(toolset, ScreensCalls)`, decided once per class."""
    return _has_protocol(type(toolset), ScreensCalls)


def routes_tools(toolset: object) -> TypeGuard[RoutesTools]:
    """`isinstance(toolset, RoutesTools)`, decided once per class."""
    return _has_protocol(type(toolset), RoutesTools)


@functools.cache
def _has_protocol(cls: type, protocol: type) -> bool:
    return issubclass(cls, protocol)
