"""A low-level fake MCP server whose `tools/list` comes in pages of two (five tools `t0`..`t4`)."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext

PAGE = 2
TOOLS = [
    types.Tool(
        name=f"t{i}",
        title=f"Tool {i}",
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
    )
    for i in range(5)
]


async def _list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    start = int(params.cursor) if params and params.cursor else 0
    nxt = str(start + PAGE) if start + PAGE < len(TOOLS) else None
    return types.ListToolsResult(tools=TOOLS[start : start + PAGE], next_cursor=nxt)


async def _call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
    args: dict[str, Any] = params.arguments or {}
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"{params.name}:{args.get('x')}")])


def build() -> Server[Any]:
    return Server("fake-paged", version="1.0", on_list_tools=_list_tools, on_call_tool=_call_tool)
