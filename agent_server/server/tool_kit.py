"""What every MCP tool of this server is made of, and the one place a tool's exception becomes a result.

A tool is registered once, as the MCP SDK's `@mcp.tool` does it: `@tool(name, description, result=...,
annotations=...)` on its handler makes a `ToolDef` holding the name, the description, the params model (the
handler's `params` annotation), the result model, the annotations and the handler (`turn_tools.py`,
`session_tools.py`; `tool_table.py` lists them in order). A handler is thin: it maps its params to one
`AgentRuntime` call (the runtime acting for the request's principal) and the outcome to an `Outcome`: the result
model (-> `structuredContent`), a short text (-> `content`) and whether it is an error. An exception becomes an
`isError` result whose `structuredContent.error` has a `type` and a `message`, as `doors.errors` classifies it.
Cancellation always propagates.

Annotations (DESIGN 3.2) let hosts gate tools: reading tools are read-only, `session_delete` is destructive,
`run_turn` (and `compact`, which asks the model) reach the open world of the model and its tools.
"""

# No `from __future__ import annotations`: `tool` reads the params model from the handler's annotations.

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, get_type_hints

import mcp_types as types
from mcp.server import ServerRequestContext
from pydantic import BaseModel, ConfigDict

from agent_server.doors.errors import classify
from agent_server.runtime import AgentRuntime, ClientModel
from agent_server.server.client_model import client_model
from agent_server.server.streaming import EventStreamer
from agent_server.types import ErrorInfo

Context = ServerRequestContext[AgentRuntime, Any]
MAX_PAGE = 200


class Params(BaseModel):
    """A tool's arguments: unknown keys are an error (a misspelt argument is not silently ignored)."""

    # Deferred: a model's validator is built on its first use, not when the tools are imported.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Result(BaseModel):
    model_config = ConfigDict(defer_build=True)


class ToolError(BaseModel):
    """The structuredContent of every tool's error results; each tool's outputSchema allows it."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    error: ErrorInfo


@dataclass(frozen=True)
class Outcome:
    result: BaseModel
    text: str
    is_error: bool = False


Handler = Callable[[AgentRuntime, Context, Any], Awaitable[Outcome]]


@dataclass(frozen=True)
class ToolDef:
    name: str
    description: str
    params: type[BaseModel]
    result: type[BaseModel]
    handler: Handler
    annotations: types.ToolAnnotations
    execution: types.ToolExecution | None = None
    """`taskSupport` for handshake-era MCP tasks (2025-11-25; absent means forbidden)."""


def tool(
    name: str,
    description: str,
    *,
    result: type[BaseModel],
    annotations: types.ToolAnnotations,
    execution: types.ToolExecution | None = None,
) -> Callable[[Handler], ToolDef]:
    """Register the decorated handler as the tool `name` (see the module docstring)."""

    def register(handler: Handler) -> ToolDef:
        params = get_type_hints(handler)["params"]
        return ToolDef(name, description, params, result, handler, annotations, execution)

    return register


def hints(
    title: str, *, read_only: bool, destructive: bool = False, idempotent: bool = False, open_world: bool = False
) -> types.ToolAnnotations:
    return types.ToolAnnotations(
        title=title,
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent or read_only,
        open_world_hint=open_world,
    )


def outcome_result(outcome: Outcome) -> types.CallToolResult:
    structured = outcome.result.model_dump(mode="json", by_alias=True)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=outcome.text)],
        structured_content=structured,
        is_error=outcome.is_error,
    )


def error_result(tool: str, exc: Exception) -> types.CallToolResult:
    """The result of a tool call that raised `exc` (not cancellation, which always propagates): every kind of
    error (`doors.errors`) is an `isError` result whose `structuredContent.error` has its type and message."""
    error = classify(exc, doing=tool)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=error.message)],
        structured_content={"error": {"type": error.type, "message": error.message}},
        is_error=True,
    )


def streamer_for(runtime: AgentRuntime, ctx: Context) -> EventStreamer:
    settings = runtime.settings
    return EventStreamer(ctx, flush_interval=settings.token_flush_interval_s, heartbeat_s=settings.heartbeat_s)


def lent_model(runtime: AgentRuntime, ctx: Context) -> ClientModel | None:
    """The client's model only matters when none is configured (sampling is asked for only then)."""
    return None if runtime.has_model else client_model(ctx)


def trace_id_from_meta(meta: Any) -> str | None:
    """The caller's trace id from request `_meta`: `trace_id`, `traceId`, or a W3C `traceparent`."""
    if not isinstance(meta, dict):
        return None
    for key in ("trace_id", "traceId"):
        value = meta.get(key)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if isinstance(value, str) and value:
            return value
    parent = meta.get("traceparent")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if isinstance(parent, str) and parent.count("-") == 3:
        return parent.split("-")[1]
    return None
