"""One handler per exposed tool, and `call_tool`: the one place exceptions become wire results.

A handler validates nothing itself (the params model did) and returns an `Outcome`: the result
model (-> `structuredContent`), a short text (-> `content`) and whether it is an error. Known
errors (`AgentServerError`) and invalid arguments become `isError` results whose
`structuredContent.error` has a `type` and a `message`; anything unexpected is logged and
reported as `internal_error` without internals. Cancellation always propagates.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from pydantic import BaseModel, ValidationError

from agent_server.agent.context import TurnRequest
from agent_server.agent.preflight import compact_session
from agent_server.agent.turns import run_turn
from agent_server.errors import INTERNAL_ERROR, AgentServerError, InvalidArgument
from agent_server.events import EventIds
from agent_server.server import tool_specs as specs
from agent_server.server.state import AppState
from agent_server.server.streaming import EventStreamer
from agent_server.types import TurnRecord, new_id

logger = logging.getLogger(__name__)

Context = ServerRequestContext[AppState, Any]


@dataclass(frozen=True)
class Outcome:
    result: BaseModel
    text: str
    is_error: bool = False


Handler = Callable[[AppState, Context, Any], Awaitable[Outcome]]


@dataclass(frozen=True)
class ToolDef:
    name: str
    description: str
    params: type[BaseModel]
    result: type[BaseModel]
    handler: Handler
    annotations: types.ToolAnnotations


async def call_tool(tool: ToolDef, state: AppState, ctx: Context, arguments: dict[str, Any]) -> types.CallToolResult:
    """Validate the arguments, run the handler, and map the outcome or the error to a result."""
    try:
        params = tool.params.model_validate(arguments)
        outcome = await tool.handler(state, ctx, params)
    except ValidationError as exc:
        return tool_error(InvalidArgument(_validation_message(tool.name, exc)))
    except AgentServerError as exc:
        return tool_error(exc)
    except Exception:
        logger.exception("tool %s failed", tool.name)
        return tool_error(AgentServerError(f"internal error in {tool.name}; see the server log"), INTERNAL_ERROR)
    structured = outcome.result.model_dump(mode="json", by_alias=True)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=outcome.text)],
        structured_content=structured,
        is_error=outcome.is_error,
    )


def tool_error(exc: AgentServerError, error_type: str | None = None) -> types.CallToolResult:
    error = {"type": error_type or exc.type, "message": exc.message}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=exc.message)],
        structured_content={"error": error},
        is_error=True,
    )


def _validation_message(tool: str, exc: ValidationError) -> str:
    problems: list[str] = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        message = "unknown argument" if error["type"] == "extra_forbidden" else error["msg"]
        problems.append(f"{where}: {message}")
    return f"invalid arguments for {tool}: " + "; ".join(problems)


# --- run_turn and compact -------------------------------------------------------------------


async def handle_run_turn(state: AppState, ctx: Context, params: specs.RunTurnParams) -> Outcome:
    timeout_s = params.timeout_s or state.settings.turn_timeout_s
    # One deadline from the call's arrival covers the mount wait, the queue and the turn.
    deadline = math.inf if timeout_s is None else anyio.current_time() + timeout_s
    streamer = _streamer(state, ctx)
    async with streamer.heartbeat():
        session_id = await state.session_for_turn(ctx, params.session_id, prompt=params.prompt)
        streamer.waiting_on("mounted MCP servers to start")
        with anyio.CancelScope(deadline=deadline):  # each mount also stops at its own startup timeout
            await state.mounts.wait_started()
        streamer.waiting_on("an earlier turn of this session to finish")
        async with state.locks.hold(session_id, deadline=deadline):
            request = _turn_request(state, ctx, params, session_id, timeout_s=timeout_s, deadline=deadline)
            record = await run_turn(state.deps(ctx, state.registry.filtered(params.tools)), request, streamer)
    return turn_outcome(record, params.detail)


def _turn_request(
    state: AppState,
    ctx: Context,
    params: specs.RunTurnParams,
    session_id: str,
    *,
    timeout_s: float | None,
    deadline: float,
) -> TurnRequest:
    notes = tuple(
        f"The tools of MCP server {name!r} are unavailable this turn: {why}" for name, why in state.mounts.unavailable()
    )
    return TurnRequest(
        prompt=params.prompt,
        session_id=session_id,
        trace_id=trace_id_from_meta(ctx.meta) or new_id("trace"),
        max_tool_passes=state.settings.max_tool_passes if params.max_tool_passes is None else params.max_tool_passes,
        timeout_s=timeout_s,
        deadline=deadline,
        trace=params.trace,
        model=params.model,
        notes=notes,
    )


def turn_outcome(record: TurnRecord, detail: specs.Detail) -> Outcome:
    """A turn's result: the record at `detail`, the final answer (or why there is none) as text."""
    text = record.final_text
    if record.status != "completed":
        reason = record.error.message if record.error else record.status
        text = f"[turn {record.status}] {reason}" + (f"\n\n{text}" if text else "")
    return Outcome(specs.TurnResult.of(record, detail), text, is_error=record.status == "failed")


def _streamer(state: AppState, ctx: Context) -> EventStreamer:
    settings = state.settings
    return EventStreamer(ctx, flush_interval=settings.token_flush_interval_s, heartbeat_s=settings.heartbeat_s)


async def handle_compact(state: AppState, ctx: Context, params: specs.CompactParams) -> Outcome:
    session_id = await state.session_or_current(ctx, params.session_id)
    streamer = _streamer(state, ctx)
    ids: EventIds = {
        "turn_id": new_id("compact"),
        "session_id": session_id,
        "trace_id": trace_id_from_meta(ctx.meta) or new_id("trace"),
    }
    keep_last = state.settings.compact_keep_last if params.keep_last is None else params.keep_last
    async with streamer.heartbeat():
        streamer.waiting_on("a turn of this session to finish")
        async with state.locks.hold(session_id):
            record = await compact_session(
                state.deps(ctx),
                session_id,
                keep_last=keep_last,
                instructions=params.instructions,
                reason="manual",
                dry_run=params.dry_run,
                emit=streamer,
                ids=ids,
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
