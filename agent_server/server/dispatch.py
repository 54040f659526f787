"""Routing a `tools/call` to its handler, once the state is built (imported on the first call)."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext

from agent_server.errors import AgentServerError
from agent_server.server.composition import LazyState
from agent_server.server.handlers import call_tool, tool_error
from agent_server.server.tool_table import TOOLS


async def dispatch(
    name: str, lazy: LazyState, ctx: ServerRequestContext[Any, Any], arguments: dict[str, Any]
) -> types.CallToolResult:
    try:
        state = await lazy.get()
    except AgentServerError as exc:
        return tool_error(exc)
    return await call_tool(TOOLS[name], state, ctx, arguments)
