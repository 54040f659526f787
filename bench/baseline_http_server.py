"""Baseline for bench/http_load.py: a bare SDK low-level `Server` over Streamable HTTP, doing a turn's MCP part.

Its one tool, `run_turn`, does what agent-server's one-call turn does on the wire and nothing else: it sends
five progress notifications (as a turn does: started, prompt, sampling, text, done), sleeps the model delay,
and answers with a result of the same shape and about the same size (text content, `structuredContent` with a
turn record's fields). Served by uvicorn with h11, as agent-server is; the 2026-07-28 `Mcp-Param-*` check looks
the tool's input schema up instead of listing the tools. So its CPU per call is the SDK's and uvicorn's floor
for the exchange, without a session store, a model client or a turn loop.

    python bench/baseline_http_server.py --port N --delay 0.2
"""

from __future__ import annotations

import argparse
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server import Server, ServerRequestContext

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"prompt": {"type": "string"}, "session_id": {"type": "string"}},
    "required": ["prompt"],
}
STEPS = ("turn started", "prompt: 1 part(s), ~774 tokens", "sampling (round 1)", "text: ok", "done: completed")


def make_server(delay: float) -> Server[Any]:
    tool = types.Tool(name="run_turn", description="One turn.", input_schema=SCHEMA)

    async def list_tools(_ctx: ServerRequestContext[Any], _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        for i, step in enumerate(STEPS[:3], start=1):
            await ctx.session.report_progress(i, None, step)
        await anyio.sleep(delay)
        for i, step in enumerate(STEPS[3:], start=4):
            await ctx.session.report_progress(i, None, step)
        record = {
            "turn_id": "turn_0123456789abcdef",
            "session_id": "ses_0123456789abcdef",
            "trace_id": "trace_0123456789abcdef",
            "status": "completed",
            "final_text": "ok",
            "tool_calls": [],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "cost_usd": None},
            "compaction": None,
            "approvals": [],
            "error": None,
            "started_at": "2026-12-01T00:00:00.000000Z",
            "finished_at": "2026-12-01T00:00:00.200000Z",
        }
        return types.CallToolResult(content=[types.TextContent(type="text", text="ok")], structured_content=record)

    return Server(
        "baseline-http",
        version="0.0.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=lambda name: SCHEMA if name == "run_turn" else None,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay", type=float, default=0.2)
    args = parser.parse_args()
    app = make_server(args.delay).streamable_http_app(host=args.host)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", http="h11", lifespan="on")
    anyio.run(uvicorn.Server(config).serve)


if __name__ == "__main__":
    main()
