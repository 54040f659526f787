"""The table of exposed tools: name, description, params and result models, handler."""

from __future__ import annotations

from functools import cache
from typing import Any

from agent_server.server import session_handlers as sessions
from agent_server.server import tool_specs as specs
from agent_server.server.handlers import ToolDef, handle_compact, handle_run_turn
from agent_server.types import SessionInfo, TurnRecord

_DEFS = [
    ToolDef(
        "run_turn",
        "Run one agent turn: the agent samples its model, runs the tools the model asks for, feeds the "
        "results back and repeats until it answers. Progress streams as notifications. Returns the turn "
        "record; the text content is the final answer.",
        specs.RunTurnParams,
        TurnRecord,
        handle_run_turn,
    ),
    ToolDef(
        "compact",
        "Summarise a session's older history into a compact summary, keeping the most recent messages "
        "verbatim. Compacted messages are archived, not deleted. dry_run previews.",
        specs.CompactParams,
        specs.CompactResult,
        handle_compact,
    ),
    ToolDef(
        "session_create",
        "Create a session and make it active.",
        specs.SessionCreateParams,
        SessionInfo,
        sessions.handle_create,
    ),
    ToolDef(
        "session_list",
        "List sessions, newest first (paged).",
        specs.SessionListParams,
        specs.SessionListResult,
        sessions.handle_list,
    ),
    ToolDef(
        "session_get",
        "A session's summary, its turn records (paged), compaction records and optionally its message history.",
        specs.SessionGetParams,
        specs.SessionGetResult,
        sessions.handle_get,
    ),
    ToolDef(
        "session_switch", "Make a session the active one.", specs.SessionIdParams, SessionInfo, sessions.handle_switch
    ),
    ToolDef(
        "session_fork",
        "Copy a session's history up to a turn into a new session.",
        specs.SessionForkParams,
        SessionInfo,
        sessions.handle_fork,
    ),
    ToolDef(
        "session_delete",
        "Delete a session and everything stored for it.",
        specs.SessionIdParams,
        specs.SessionDeleteResult,
        sessions.handle_delete,
    ),
    ToolDef(
        "agent_tools",
        "The agent's own tools (with their source) and the state of each mounted MCP server.",
        specs.AgentToolsParams,
        specs.AgentToolsResult,
        sessions.handle_agent_tools,
    ),
]

TOOLS: dict[str, ToolDef] = {d.name: d for d in _DEFS}


@cache
def tool_schemas(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(inputSchema, outputSchema) of a tool, computed once."""
    tool = TOOLS[name]
    return tool.params.model_json_schema(), tool.result.model_json_schema(mode="serialization")
