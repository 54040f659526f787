"""Background turns over MCP: `run_turn(background: true)`, `turn_get`, `turn_wait`, `turn_cancel`.

A background turn belongs to the principal that started it (DESIGN 3.10), not to the request or connection:
any caller of that principal that knows its `turn_id` may follow or cancel it (ids are random, 64 bits);
another principal's calls find no such turn. `turn_wait`
streams the turn's events on its own progress token (and in full to clients with the events
extension) from the first one this connection has not been sent yet (`after_event` overrides;
a 2026-07-28 HTTP request has no connection identity and starts at the first event), and it ends
when the turn ends or its own `timeout_s` passes, with the `running` record then. Cancelling a
`turn_wait` (its caller's timeout) ends the wait only; the turn goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_server.runtime import AgentRuntime, TurnHandle, TurnOptions
from agent_server.server import tool_specs as specs
from agent_server.server.connections import connection_key
from agent_server.server.handlers import Context, Outcome, streamer_for, trace_id_from_meta, turn_outcome

if TYPE_CHECKING:
    from agent_server.server.input_requests import Lent


async def start_background(runtime: AgentRuntime, ctx: Context, params: specs.RunTurnParams) -> Outcome:
    handle = await begin_background(runtime, ctx, params)
    return turn_outcome(handle.record, params.detail)


async def begin_background(
    runtime: AgentRuntime, ctx: Context, params: specs.RunTurnParams, lent: Lent | None = None
) -> TurnHandle:
    """Start `params`' turn in the background, with this request's connection and trace id, and what the
    request lends it through a park (`lent`: 2026-07-28 tasks and `InputRequiredResult` rounds)."""
    trace_id = trace_id_from_meta(ctx.meta)
    if lent is None:
        options = TurnOptions.of(params, trace_id=trace_id)
    else:
        options = TurnOptions.of(params, trace_id=trace_id, approvals=lent.approvals, client_model=lent.client_model)
    return await runtime.start_turn(
        params.prompt,
        session_id=params.session_id,
        connection=connection_key(ctx),
        options=options,
        park=None if lent is None else lent.park,
    )


async def handle_turn_get(runtime: AgentRuntime, ctx: Context, params: specs.TurnGetParams) -> Outcome:
    record = await runtime.find_turn(params.turn_id, params.session_id)
    outcome = turn_outcome(record, params.detail)
    return Outcome(outcome.result, outcome.text)  # the lookup succeeded, whatever the turn's status


async def handle_turn_wait(runtime: AgentRuntime, ctx: Context, params: specs.TurnWaitParams) -> Outcome:
    handle = runtime.background_turn(params.turn_id)
    if handle is None:  # not followed here: its stored record (waited for, if another replica runs it)
        record = await runtime.wait_stored_turn(params.turn_id, params.session_id, timeout_s=params.timeout_s)
        return _waited(turn_outcome(record, params.detail), last_event=0)
    streamer = streamer_for(runtime, ctx)
    async with streamer.heartbeat():
        last = await handle.follow(
            streamer, follower=connection_key(ctx), after=params.after_event, timeout_s=params.timeout_s
        )
        await streamer.flush()
    return _waited(turn_outcome(handle.record, params.detail), last_event=last)


async def handle_turn_cancel(runtime: AgentRuntime, ctx: Context, params: specs.TurnCancelParams) -> Outcome:
    record = await runtime.cancel_turn(params.turn_id)
    return turn_outcome(record, params.detail)


def _waited(outcome: Outcome, *, last_event: int) -> Outcome:
    result = specs.TurnWaitResult(**outcome.result.model_dump(), last_event=last_event)
    return Outcome(result, outcome.text, outcome.is_error)
