"""The tools this server exposes, in the order `tools/list` gives them, and `call_tool`: the one place a call is
validated, run and answered (its error classified by `doors.errors`, through `tool_kit.error_result`).

Each tool is registered once where it is defined (`tool_kit.tool`); this table only orders them. Every
outputSchema also admits the error shape (`ToolError`), since error results carry `structuredContent` too and
strict clients validate it. `tools/list` itself is served from the generated `tools.json` (`listing.py`).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import mcp_types as types
from pydantic import BaseModel, TypeAdapter

from agent_server.server import session_tools, turn_tools
from agent_server.server.principals import caller_runtime
from agent_server.server.tool_kit import Context, ToolDef, ToolError, error_result, outcome_result

_ORDER: list[ToolDef] = [
    turn_tools.run_turn,
    turn_tools.turn_get,
    turn_tools.turn_wait,
    turn_tools.turn_cancel,
    turn_tools.compact,
    session_tools.session_create,
    session_tools.session_list,
    session_tools.session_get,
    session_tools.session_switch,
    session_tools.session_fork,
    session_tools.session_delete,
    session_tools.agent_tools,
]
TOOLS: dict[str, ToolDef] = {tool.name: tool for tool in _ORDER}


async def call_tool(name: str, ctx: Context, arguments: dict[str, Any]) -> types.CallToolResult:
    """Validate the arguments, run the tool's handler, and map the outcome or the error to a result."""
    tool = TOOLS[name]
    try:
        params = tool.params.model_validate(arguments)
        outcome = await tool.handler(caller_runtime(ctx), ctx, params)
    except Exception as exc:
        return error_result(tool.name, exc)
    return outcome_result(outcome)


@cache
def tool_schemas(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(inputSchema, outputSchema) of a tool, computed once."""
    tool = TOOLS[name]
    return tool.params.model_json_schema(), output_schema(tool.result)


def output_schema(result: type[BaseModel]) -> dict[str, Any]:
    """The result model's schema, or the error shape: `{"type": "object", "anyOf": [...], "$defs": ...}`."""
    either: Any = result | ToolError
    schema = TypeAdapter[Any](either).json_schema(mode="serialization")
    return {"type": "object", "title": result.__name__, **schema}
