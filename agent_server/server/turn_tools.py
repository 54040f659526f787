"""The turn tools, each registered once with its models: `run_turn`, `turn_get`, `turn_wait`, `turn_cancel`,
`compact`; and the pieces of a turn that MCP tasks and rounds share (`begin_background`, `turn_outcome`).

Background turns (DESIGN 3.6): a background turn belongs to the principal that started it (DESIGN 3.10), not to
the request or connection: any caller of that principal that knows its `turn_id` may follow or cancel it (ids
are random, 64 bits); another principal's calls find no such turn. `turn_wait` streams the turn's events on its
own progress token (and in full to clients with the events extension) from the first one this connection has not
been sent yet (`after_event` overrides; a 2026-07-28 HTTP request has no connection identity and starts at the
first event), and it ends when the turn ends or its own `timeout_s` passes, with the `running` record then.
Cancelling a `turn_wait` (its caller's timeout) ends the wait only; the turn goes on.
"""

# No `from __future__ import annotations`: pydantic would compile every annotation string at import
# (about 6 ms of the first call); `tool` reads the params models from the handlers' annotations.

from typing import TYPE_CHECKING

import mcp_types as types
from pydantic import Field, field_validator

from agent_server.doors.records import DETAIL_HELP, Detail, TurnView, turn_view
from agent_server.runtime import AgentRuntime, TurnHandle, TurnOptions
from agent_server.server.approval_channel import approval_channel
from agent_server.server.connections import connection_key
from agent_server.server.tool_kit import (
    Context,
    Outcome,
    Params,
    hints,
    lent_model,
    streamer_for,
    tool,
    trace_id_from_meta,
)
from agent_server.turn_options import TurnChoices
from agent_server.types import CompactionRecord, TurnRecord

if TYPE_CHECKING:
    from agent_server.server.input_requests import Lent

TurnResult = TurnView
"""The result of `run_turn`, `turn_get` and `turn_cancel` (`doors.records`: every door's view of a record)."""
TURN_ID_HELP = "The turn_id of a run_turn result."
TURN_SESSION_HELP = "The turn's session_id (optional: a turn is found by its turn_id alone)."
TURN_WAIT_DEFAULT_S = 60.0
TURN_WAIT_MAX_S = 600.0
_CONTINUE = (
    " To continue a conversation pass the session_id of an earlier result; session_id `new` starts a fresh "
    "one; without session_id the turn runs in this connection's current session (created by the first such call)."
)


class RunTurnParams(TurnChoices):
    """`run_turn`'s arguments: the turn's choices (`TurnChoices`, every door's), and the MCP door's own."""

    prompt: str = Field(min_length=1, description="What the user asks the agent; must not be blank.")
    session_id: str | None = Field(
        default=None,
        description=(
            "To continue a conversation, the session_id of an earlier result; `new` starts a fresh session; "
            "omitted: this connection's current session (created by the first such call)."
        ),
    )
    detail: Detail = Field(default="summary", description=DETAIL_HELP)
    background: bool = Field(
        default=False,
        description=(
            "Return the `running` record at once and run the turn in the server; follow it with turn_wait "
            "(streams its events) or turn_get, stop it with turn_cancel. For hosts whose tool calls time out."
        ),
    )

    @field_validator("prompt")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("prompt must not be blank")
        return value


class TurnGetParams(Params):
    turn_id: str = Field(min_length=1, description=TURN_ID_HELP)
    session_id: str | None = Field(default=None, description=TURN_SESSION_HELP)
    detail: Detail = Field(default="summary", description=DETAIL_HELP)


class TurnWaitParams(Params):
    turn_id: str = Field(min_length=1, description=TURN_ID_HELP)
    session_id: str | None = Field(default=None, description=TURN_SESSION_HELP)
    timeout_s: float = Field(
        default=TURN_WAIT_DEFAULT_S,
        gt=0,
        le=TURN_WAIT_MAX_S,
        description="How long to wait; then the `running` record comes back (the turn goes on). Default 60.",
    )
    after_event: int | None = Field(
        default=None,
        ge=0,
        description=(
            "Stream the events after this number (a previous result's last_event; 0: all of them). "
            "Default: after the last event this connection was sent."
        ),
    )
    detail: Detail = Field(default="summary", description=DETAIL_HELP)


class TurnWaitResult(TurnView):
    last_event: int = Field(description="The number of the last event of the turn sent so far (for after_event).")


class TurnCancelParams(Params):
    turn_id: str = Field(min_length=1, description=TURN_ID_HELP)
    detail: Detail = Field(default="summary", description=DETAIL_HELP)


class CompactParams(Params):
    session_id: str | None = Field(default=None, description="Session to compact; default the current one.")
    keep_last: int | None = Field(default=None, ge=0, le=10_000, description="Recent messages kept verbatim.")
    instructions: str | None = Field(default=None, description="What the summary must keep.")
    dry_run: bool = Field(default=False, description="Preview the summary without changing the session.")


class CompactResult(CompactionRecord):
    session_id: str


@tool(
    "run_turn",
    "Run one agent turn: the agent samples its model, runs the tools the model asks for, feeds the "
    "results back and repeats until it answers. Progress streams as notifications. The text content is "
    "the final answer; structuredContent is a short summary of the turn (detail `full` for the whole "
    "record)." + _CONTINUE,
    result=TurnResult,
    annotations=hints("Run an agent turn", read_only=False, open_world=True),
    execution=types.ToolExecution(task_support="optional"),
)
async def run_turn(runtime: AgentRuntime, ctx: Context, params: RunTurnParams) -> Outcome:
    if params.background:
        handle = await begin_background(runtime, ctx, params)
        return _progressed(runtime, handle.record, params.detail)
    streamer = streamer_for(runtime, ctx)
    options = TurnOptions.of(
        params,
        trace_id=trace_id_from_meta(ctx.meta),
        approvals=approval_channel(ctx),
        client_model=lent_model(runtime, ctx),
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


@tool(
    "turn_get",
    "A turn's record, running or ended (summary unless detail `full`), found by its turn_id.",
    result=TurnResult,
    annotations=hints("Get a turn", read_only=True),
)
async def turn_get(runtime: AgentRuntime, ctx: Context, params: TurnGetParams) -> Outcome:
    record = await runtime.find_turn(params.turn_id, params.session_id)
    outcome = _progressed(runtime, record, params.detail)
    return Outcome(outcome.result, outcome.text)  # the lookup succeeded, whatever the turn's status


@tool(
    "turn_wait",
    "Wait for a background turn (run_turn with background true) to end, streaming its events as progress "
    "from the first one this connection has not seen. Returns the ended turn's result, or the `running` "
    "record when timeout_s passes (call again to keep waiting; the turn goes on meanwhile).",
    result=TurnWaitResult,
    annotations=hints("Wait for a turn", read_only=True),
)
async def turn_wait(runtime: AgentRuntime, ctx: Context, params: TurnWaitParams) -> Outcome:
    handle = runtime.background_turn(params.turn_id)
    if handle is None:  # not followed here: its stored record (waited for, if another replica runs it)
        record = await runtime.wait_stored_turn(params.turn_id, params.session_id, timeout_s=params.timeout_s)
        return _waited(_progressed(runtime, record, params.detail), last_event=0)
    streamer = streamer_for(runtime, ctx)
    async with streamer.heartbeat():
        last = await handle.follow(
            streamer, follower=connection_key(ctx), after=params.after_event, timeout_s=params.timeout_s
        )
        await streamer.flush()
    return _waited(_progressed(runtime, handle.record, params.detail, last), last_event=last)


@tool(
    "turn_cancel",
    "Cancel a running background turn; returns its record (`cancelled`). An error if the turn is not "
    "running in this server process.",
    result=TurnResult,
    annotations=hints("Cancel a turn", read_only=False, idempotent=True),
)
async def turn_cancel(runtime: AgentRuntime, ctx: Context, params: TurnCancelParams) -> Outcome:
    record = await runtime.cancel_turn(params.turn_id)
    return turn_outcome(record, params.detail)


@tool(
    "compact",
    "Summarise a session's older history into a compact summary, keeping the most recent messages "
    "verbatim. Compacted messages are archived, not deleted. dry_run previews.",
    result=CompactResult,
    annotations=hints("Compact a session", read_only=False, open_world=True),
)
async def compact(runtime: AgentRuntime, ctx: Context, params: CompactParams) -> Outcome:
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
            client_model=lent_model(runtime, ctx),
        )
        await streamer.flush()
    result = CompactResult(session_id=session_id, **record.model_dump())
    verb = "would compact" if record.dry_run else "compacted"
    text = f"{verb} {record.compacted_message_count} message(s) ({record.mode}), kept {record.preserved_message_count}"
    return Outcome(result, text + (f"\n\n{record.summary}" if record.summary else ""))


async def begin_background(
    runtime: AgentRuntime, ctx: Context, params: RunTurnParams, lent: "Lent | None" = None
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


def _progressed(runtime: AgentRuntime, record: TurnRecord, detail: Detail, last_event: int | None = None) -> Outcome:
    """`turn_outcome`; a `running` one's text says where the turn is and what it did so far (so that successive
    polls differ) and, after a wait, how to go on after its events."""
    outcome = turn_outcome(record, detail)
    if record.status != "running":
        return outcome
    return Outcome(outcome.result, runtime.running_text(record, last_event=last_event), outcome.is_error)


def _waited(outcome: Outcome, *, last_event: int) -> Outcome:
    result = TurnWaitResult(**outcome.result.model_dump(), last_event=last_event)
    return Outcome(result, outcome.text, outcome.is_error)
