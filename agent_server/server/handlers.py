"""One handler per exposed tool, and `call_tool`: the one place exceptions become wire results.

Handlers are thin: each maps its params to one `AgentRuntime` call (the runtime acting for this request's
principal, with its connection, events, trace id and client model) and the outcome to an `Outcome`: the result model
(-> `structuredContent`), a short text (-> `content`) and whether it is an error. An exception becomes an
`isError` result whose `structuredContent.error` has a `type` and a `message`, as `doors.errors` classifies it
(anything unexpected logged there and reported as `internal_error` without internals). Cancellation always
propagates.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from pydantic import BaseModel

from agent_server.doors.errors import classify
from agent_server.doors.records import Detail, turn_view
from agent_server.runtime import AgentRuntime, ClientModel, TurnOptions
from agent_server.server import tool_specs as specs
from agent_server.server.approval_channel import approval_channel
from agent_server.server.client_model import client_model
from agent_server.server.connections import connection_key
from agent_server.server.principals import caller_runtime
from agent_server.server.streaming import EventStreamer
from agent_server.types import TurnRecord

Context = ServerRequestContext[AgentRuntime, Any]


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


async def call_tool(name: str, ctx: Context, arguments: dict[str, Any]) -> types.CallToolResult:
    """Validate the arguments, run the tool's handler, and map the outcome or the error to a result."""
    from agent_server.server.tool_table import TOOLS

    tool = TOOLS[name]
    try:
        params = tool.params.model_validate(arguments)
        outcome = await tool.handler(caller_runtime(ctx), ctx, params)
    except Exception as exc:
        return error_result(tool.name, exc)
    return outcome_result(outcome)


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


# --- run_turn and compact -------------------------------------------------------------------


async def handle_run_turn(runtime: AgentRuntime, ctx: Context, params: specs.RunTurnParams) -> Outcome:
    if params.background:
        from agent_server.server.turn_handlers import start_background

        return await start_background(runtime, ctx, params)
    streamer = streamer_for(runtime, ctx)
    options = TurnOptions.of(
        params,
        trace_id=trace_id_from_meta(ctx.meta),
        approvals=approval_channel(ctx),
        client_model=_client_model(runtime, ctx),
    )
    async with streamer.heartbeat():
        record = await runtime.run_turn(
            params.prompt,
            session_id=params.session_id,
            connection=connection_key(ctx),
            on_event=streamer,
            on_wait=streamer.waiting_on,
            options=options,
        )
    return turn_outcome(record, params.detail)


def turn_outcome(record: TurnRecord, detail: Detail) -> Outcome:
    """A turn's result: the record at `detail`, the final answer (or why there is none) as text."""
    text = record.final_text
    if record.status == "running":
        text = (
            f"[turn running] turn {record.turn_id} of session {record.session_id} runs in the background: "
            "follow it with turn_wait or turn_get, stop it with turn_cancel"
        )
    elif record.status == "awaiting_input":
        text = (
            f"[turn awaiting_input] turn {record.turn_id} of session {record.session_id} waits for its client's "
            "answer (an approval or a call of the client's model); without one it ends cancelled after park_timeout_s"
        )
    elif record.status != "completed":
        reason = record.error.message if record.error else record.status
        text = f"[turn {record.status}] {reason}" + (f"\n\n{text}" if text else "")
    return Outcome(turn_view(record, detail), text, is_error=record.status == "failed")


def streamer_for(runtime: AgentRuntime, ctx: Context) -> EventStreamer:
    settings = runtime.settings
    return EventStreamer(ctx, flush_interval=settings.token_flush_interval_s, heartbeat_s=settings.heartbeat_s)


def _client_model(runtime: AgentRuntime, ctx: Context) -> ClientModel | None:
    """The client's model only matters when none is configured (sampling is asked for only then)."""
    return None if runtime.has_model else client_model(ctx)


async def handle_compact(runtime: AgentRuntime, ctx: Context, params: specs.CompactParams) -> Outcome:
    session_id = await runtime.session_or_current(params.session_id, connection=connection_key(ctx))
    streamer = streamer_for(runtime, ctx)
    async with streamer.heartbeat():
        record = await runtime.compact(
            session_id,
            keep_last=params.keep_last,
            instructions=params.instructions,
            dry_run=params.dry_run,
            on_event=streamer,
            on_wait=streamer.waiting_on,
            trace_id=trace_id_from_meta(ctx.meta),
            client_model=_client_model(runtime, ctx),
        )
        await streamer.flush()
    result = specs.CompactResult(session_id=session_id, **record.model_dump())
    verb = "would compact" if record.dry_run else "compacted"
    text = f"{verb} {record.compacted_message_count} message(s) ({record.mode}), kept {record.preserved_message_count}"
    return Outcome(result, text + (f"\n\n{record.summary}" if record.summary else ""))


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
