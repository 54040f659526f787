"""The tool boundary: a `Toolset` lists tools and runs calls.

Built-in workspace tools, plugins and mounted MCP servers are all toolsets; the registry
merges them. `call_tool` never raises for a failed call: it returns a `ToolResult` with
`is_error=True` that the model reads. Cancellation propagates.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

from agent_server.types import DroppedTool, ToolResult, ToolSpec

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]
"""`(progress, total, message)` reported by a tool while it runs."""


class Toolset(Protocol):
    async def list_tools(self) -> list[ToolSpec]:
        """The tools this set offers now."""
        ...

    async def call_tool(
        self,
        call_id: str,
        name: str,
        arguments: dict[str, Any],
        *,
        on_progress: ProgressCallback | None = None,
    ) -> ToolResult:
        """Run one call. A failure is a `ToolResult` with `is_error=True`, never an exception."""
        ...


@runtime_checkable
class DropsTools(Protocol):
    """A toolset that leaves some of its tools out (see `DroppedTool`) and can say which and why."""

    def dropped(self) -> list[DroppedTool]:
        """The tools left out of the last `list_tools()`."""
        ...
