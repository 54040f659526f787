"""The table of exposed tools: name, description, params and result models, handler, annotations.

Annotations (DESIGN 3.2) let hosts gate tools: reading tools are read-only, `session_delete` is
destructive, `run_turn` (and `compact`, which asks the model) reach the open world of the model
and its tools. Every outputSchema also admits the error shape (`ToolError`), since error results
carry `structuredContent` too and strict clients validate it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import mcp_types as types
from pydantic import BaseModel, TypeAdapter

from agent_server.server import session_handlers as sessions
from agent_server.server import tool_specs as specs
from agent_server.server import turn_handlers as turns
from agent_server.server.handlers import ToolDef, handle_compact, handle_run_turn
from agent_server.types import SessionInfo


def _hints(
    title: str, *, read_only: bool, destructive: bool = False, idempotent: bool = False, open_world: bool = False
) -> types.ToolAnnotations:
    return types.ToolAnnotations(
        title=title,
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent or read_only,
        open_world_hint=open_world,
    )


_CONTINUE = (
    " To continue a conversation pass the session_id of an earlier result; session_id `new` starts a fresh "
    "one; without session_id the turn runs in this connection's current session (created by the first such call)."
)
_DEFS = [
    ToolDef(
        "run_turn",
        "Run one agent turn: the agent samples its model, runs the tools the model asks for, feeds the "
        "results back and repeats until it answers. Progress streams as notifications. The text content is "
        "the final answer; structuredContent is a short summary of the turn (detail `full` for the whole "
        "record)." + _CONTINUE,
        specs.RunTurnParams,
        specs.TurnResult,
        handle_run_turn,
        _hints("Run an agent turn", read_only=False, open_world=True),
        types.ToolExecution(task_support="optional"),
    ),
    ToolDef(
        "turn_get",
        "A turn's record, running or ended (summary unless detail `full`), found by its turn_id.",
        specs.TurnGetParams,
        specs.TurnResult,
        turns.handle_turn_get,
        _hints("Get a turn", read_only=True),
    ),
    ToolDef(
        "turn_wait",
        "Wait for a background turn (run_turn with background true) to end, streaming its events as progress "
        "from the first one this connection has not seen. Returns the ended turn's result, or the `running` "
        "record when timeout_s passes (call again to keep waiting; the turn goes on meanwhile).",
        specs.TurnWaitParams,
        specs.TurnWaitResult,
        turns.handle_turn_wait,
        _hints("Wait for a turn", read_only=True),
    ),
    ToolDef(
        "turn_cancel",
        "Cancel a running background turn; returns its record (`cancelled`). An error if the turn is not "
        "running in this server process.",
        specs.TurnCancelParams,
        specs.TurnResult,
        turns.handle_turn_cancel,
        _hints("Cancel a turn", read_only=False, idempotent=True),
    ),
    ToolDef(
        "compact",
        "Summarise a session's older history into a compact summary, keeping the most recent messages "
        "verbatim. Compacted messages are archived, not deleted. dry_run previews.",
        specs.CompactParams,
        specs.CompactResult,
        handle_compact,
        _hints("Compact a session", read_only=False, open_world=True),
    ),
    ToolDef(
        "session_create",
        "Create a session and make it this connection's current session.",
        specs.SessionCreateParams,
        SessionInfo,
        sessions.handle_create,
        _hints("Create a session", read_only=False),
    ),
    ToolDef(
        "session_list",
        "List sessions, newest first (paged); `active` marks this connection's current session.",
        specs.SessionListParams,
        specs.SessionListResult,
        sessions.handle_list,
        _hints("List sessions", read_only=True),
    ),
    ToolDef(
        "session_get",
        "A session's summary, its turns (paged; summaries unless detail `full`), compaction records and "
        "optionally its message history.",
        specs.SessionGetParams,
        specs.SessionGetResult,
        sessions.handle_get,
        _hints("Inspect a session", read_only=True),
    ),
    ToolDef(
        "session_switch",
        "Make a session this connection's current session (other connections keep theirs).",
        specs.SessionIdParams,
        SessionInfo,
        sessions.handle_switch,
        _hints("Switch session", read_only=False, idempotent=True),
    ),
    ToolDef(
        "session_fork",
        "Copy a session's history up to a turn into a new session.",
        specs.SessionForkParams,
        SessionInfo,
        sessions.handle_fork,
        _hints("Fork a session", read_only=False),
    ),
    ToolDef(
        "session_delete",
        "Delete a session and everything stored for it.",
        specs.SessionIdParams,
        specs.SessionDeleteResult,
        sessions.handle_delete,
        _hints("Delete a session", read_only=False, destructive=True, idempotent=True),
    ),
    ToolDef(
        "agent_tools",
        "The agent's own tools (with their source) and the state of each mounted MCP server.",
        specs.AgentToolsParams,
        specs.AgentToolsResult,
        sessions.handle_agent_tools,
        _hints("List the agent's tools", read_only=True),
    ),
]

TOOLS: dict[str, ToolDef] = {d.name: d for d in _DEFS}


@cache
def tool_schemas(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(inputSchema, outputSchema) of a tool, computed once."""
    tool = TOOLS[name]
    return tool.params.model_json_schema(), output_schema(tool.result)


def output_schema(result: type[BaseModel]) -> dict[str, Any]:
    """The result model's schema, or the error shape: `{"type": "object", "anyOf": [...], "$defs": ...}`."""
    either: Any = result | specs.ToolError
    schema = TypeAdapter[Any](either).json_schema(mode="serialization")
    return {"type": "object", "title": result.__name__, **schema}
