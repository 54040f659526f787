"""Routing a `tools/call` to its handler, once the state is built (imported on the first call)."""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext

from agent_server.errors import INTERNAL_ERROR, AgentServerError
from agent_server.server.composition import LazyState
from agent_server.server.handlers import call_tool, tool_error
from agent_server.server.tool_table import TOOLS

logger = logging.getLogger(__name__)


async def dispatch(
    name: str, lazy: LazyState, ctx: ServerRequestContext[Any, Any], arguments: dict[str, Any]
) -> types.CallToolResult:
    try:
        state = await lazy.get()
    except AgentServerError as exc:
        return tool_error(exc)
    except Exception:
        # Never a JSON-RPC error with a raw errno text: the caller gets a result it can show.
        logger.exception("could not set up the server's state for %s", name)
        return tool_error(AgentServerError("internal error while starting up; see the server log"), INTERNAL_ERROR)
    return await call_tool(TOOLS[name], state, ctx, arguments)
