"""A fake MCP server to mount (stdio: `python tests/fakes/mcp_trace_meta.py`): its one tool, `trace_meta`, answers
with the trace context entries of the call's `_meta` (`traceparent`, `tracestate`), as a traced server reads them."""

from __future__ import annotations

import json
import warnings

from mcp import MCPDeprecationWarning
from mcp.server.mcpserver import Context, MCPServer

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

server = MCPServer("trace-meta", version="1.0.0", log_level="WARNING")


@server.tool(description="The traceparent and tracestate of this call's _meta (null when absent)")
async def trace_meta(ctx: Context) -> str:
    meta = dict(ctx.request_context.meta or {})
    return json.dumps({key: meta.get(key) for key in ("traceparent", "tracestate")})


if __name__ == "__main__":
    server.run()
