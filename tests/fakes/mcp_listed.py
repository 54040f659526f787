"""A low-level fake MCP server offering exactly the tools it is given (any names, any schemas).

A call answers with the server's own name of the tool, so a test sees which tool was reached.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext

OBJECT = {"type": "object", "properties": {}}


def tool(name: str, schema: dict[str, Any] | None = None) -> types.Tool:
    return types.Tool(name=name, description=f"tool {name}", input_schema=OBJECT if schema is None else schema)


def build(tools: Sequence[types.Tool]) -> Server[Any]:
    listed = list(tools)

    async def list_tools(
        ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=params.name)])

    return Server("fake-listed", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)
