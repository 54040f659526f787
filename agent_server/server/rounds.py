"""`run_turn` over multi round-trip requests on 2026-07-28 (SEP-2322, DESIGN 3.8).

On 2026-07-28 a server cannot send the client requests, so a turn that needs its client mid-way (an
approval, a call of the client's own model) cannot ask the way the handshake era does. When the request
lends the turn something through a park (`input_requests.lend`: approvals when it declared form
elicitation, the client's model when none is configured and it declared sampling), the turn runs in the
runtime's background task group and this request waits until it ends (the usual result) or parks: then
it answers `InputRequiredResult` with the pending `inputRequests` (`approve-<call_id>`, `llm-<n>`) and a
`requestState` naming the parked turn and the last event this call streamed. The SDK's
`RequestStateBoundary` (installed by `app.py`) seals that state; a tampered or expired one is its error.
The client's retry carries `inputResponses` and the state: they are delivered, and the retry waits in
turn. Each round streams the turn's events it has not streamed yet on its own progress token.

A request that lends nothing (no elicitation, a configured model or no sampling) runs the turn the usual
way, where the client's model gives the clear error of `client_model.py`. A client that stops retrying
leaves its turn parked until `park_timeout_s`, when the turn ends `cancelled` saying so; cancelling a
round's request cancels the turn, as it would a synchronous one. Such a turn counts as one of its principal's
background turns while it runs, and as one that may wait for its client (`limits.background_turns` and
`limits.parked_turns`, per principal). A retry whose `requestState` names another principal's turn is answered
as one naming a turn that is gone (the SDK binds a sealed state to its principal too). The SDK client retries
at most `input_required_max_rounds` (10) times per call: a turn needing more answers needs that raised.
"""

from __future__ import annotations

import json
import math

import anyio
import mcp_types as types
from pydantic import ValidationError

from agent_server.doors.records import Detail
from agent_server.errors import InvalidArgument
from agent_server.runtime import AgentRuntime, TurnHandle
from agent_server.server.input_requests import deliver, lend, wire_requests
from agent_server.server.principals import caller_runtime
from agent_server.server.tool_kit import Context, error_result, outcome_result, streamer_for
from agent_server.server.turn_tools import RunTurnParams, begin_background, turn_outcome

CHANNEL = "input_required"
"""The approval channel's name in turn records."""
GONE = "the turn this requestState names is no longer followed by this server (it ended long ago, or the "
"server restarted): run the turn again"


Answer = types.CallToolResult | types.InputRequiredResult


async def call_run_turn(ctx: Context, params: types.CallToolRequestParams) -> Answer | None:
    """This 2026-07-28 `run_turn` in rounds, or None when it should run the usual way (see the docstring)."""
    runtime = caller_runtime(ctx)
    try:
        turn = RunTurnParams.model_validate(params.arguments or {})
    except ValidationError as exc:
        return error_result("run_turn", exc)
    if turn.background:
        return None
    if params.request_state is not None:
        return await _resume(runtime, ctx, turn, params)
    lent = lend(runtime, ctx, CHANNEL)
    if not lent.anything:
        return None
    try:
        handle = await begin_background(runtime, ctx, turn, lent)
    except Exception as exc:
        return error_result("run_turn", exc)
    return await _round(runtime, ctx, handle, turn.detail, after=0)


async def _resume(
    runtime: AgentRuntime, ctx: Context, turn: RunTurnParams, params: types.CallToolRequestParams
) -> Answer:
    try:
        turn_id, after = _state(params.request_state or "")
    except (ValueError, KeyError, TypeError) as exc:  # sealed by us, so only a bug of ours gets here
        return error_result("run_turn", InvalidArgument(f"unreadable requestState: {exc}"))
    handle = runtime.background_turn(turn_id)
    if handle is None:
        return error_result("run_turn", InvalidArgument(GONE))
    if handle.park is not None and not handle.done:
        deliver(handle.park, params.input_responses or {})
    return await _round(runtime, ctx, handle, turn.detail, after=after)


async def _round(runtime: AgentRuntime, ctx: Context, handle: TurnHandle, detail: Detail, *, after: int) -> Answer:
    """Stream the turn until it ends or parks; its result, or the round's `InputRequiredResult`."""
    streamer = streamer_for(runtime, ctx)
    try:
        async with streamer.heartbeat():
            last = await handle.follow(streamer, after=after, timeout_s=math.inf, until_input=True)
            await streamer.flush()
    except anyio.get_cancelled_exc_class():  # the caller gave up on this call: the turn stops, as when synchronous
        handle.cancel()
        raise
    if handle.done or handle.park is None or not handle.awaiting_input:
        return outcome_result(turn_outcome(handle.record, detail))
    return types.InputRequiredResult(
        input_requests=dict(wire_requests(handle.park)),
        request_state=json.dumps({"turn": handle.turn_id, "after": last}),
    )


def _state(text: str) -> tuple[str, int]:
    state = json.loads(text)
    turn_id, after = state["turn"], state["after"]
    if not isinstance(turn_id, str) or not isinstance(after, int):
        raise ValueError("not a turn and an event number")
    return turn_id, after
