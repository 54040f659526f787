"""The tools this server exposes, in the order `tools/list` gives them, and `call_tool`: the one place a call is
validated, run and answered (its error classified by `doors.errors`, through `tool_kit.error_result`).

Each tool is registered once where it is defined (`tool_kit.tool`, as a module attribute of the tool's own
name); this table only orders them, by module, and imports a module with the first call of one of its tools:
a `run_turn` never loads the session tools' models (about 7 ms of a first turn). Every outputSchema also
admits the error shape (`ToolError`), since error results carry `structuredContent` too and strict clients
validate it. `tools/list` itself is served from the generated `tools.json` (`listing.py`).
"""

from __future__ import annotations

from functools import cache
from importlib import import_module
from typing import Any

import mcp_types as types
from pydantic import BaseModel, TypeAdapter

from agent_server.server.principals import caller_runtime
from agent_server.server.tool_kit import Context, ToolDef, ToolError, error_result, outcome_result

_ORDER: dict[str, tuple[str, ...]] = {
    "agent_server.server.turn_tools": ("run_turn", "turn_get", "turn_wait", "turn_cancel", "compact"),
    "agent_server.server.session_tools": (
        "session_create",
        "session_list",
        "session_get",
        "session_switch",
        "session_fork",
        "session_delete",
        "agent_tools",
    ),
}
_MODULE_OF = {name: module for module, names in _ORDER.items() for name in names}
NAMES: tuple[str, ...] = tuple(_MODULE_OF)
"""Every tool's name, in listing order."""


@cache
def tool(name: str) -> ToolDef:
    """The tool `name` (one of `NAMES`), its module imported on first use."""
    found = getattr(import_module(_MODULE_OF[name]), name)
    if not isinstance(found, ToolDef) or found.name != name:
        raise TypeError(f"{_MODULE_OF[name]}.{name} is not the tool {name!r}")
    return found


def all_tools() -> dict[str, ToolDef]:
    """Every tool by name, in listing order (imports every tool module)."""
    return {name: tool(name) for name in NAMES}


async def call_tool(name: str, ctx: Context, arguments: dict[str, Any]) -> types.CallToolResult:
    """Validate the arguments, run the tool's handler, and map the outcome or the error to a result."""
    called = tool(name)
    try:
        params = called.params.model_validate(arguments)
        outcome = await called.handler(caller_runtime(ctx), ctx, params)
    except Exception as exc:
        return error_result(called.name, exc)
    return outcome_result(outcome)


@cache
def tool_schemas(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(inputSchema, outputSchema) of a tool, computed once."""
    listed = tool(name)
    return listed.params.model_json_schema(), output_schema(listed.result)


def output_schema(result: type[BaseModel]) -> dict[str, Any]:
    """The result model's schema, or the error shape: `{"type": "object", "anyOf": [...], "$defs": ...}`."""
    either: Any = result | ToolError
    schema = TypeAdapter[Any](either).json_schema(mode="serialization")
    return {"type": "object", "title": result.__name__, **schema}
