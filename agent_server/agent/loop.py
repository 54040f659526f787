"""The sampling and tool-round loop of one turn: a small explicit state machine.

Each step runs one phase and returns the `NextStep`; `drive` records the transition the step
names (its `phase` and `reason` are what the turn record's `transitions` say) and runs the next:

    sampling --(answer without tools)--> finalizing            status completed
    sampling --(answer cut at max_tokens)--> finalizing        status truncated (`stops.py`)
    sampling --(tools requested)-------> executing_tools --> post_tool_decision --> sampling
                                         (the request is fitted to the window again: `window.py`)
    sampling --(tools requested)-------> executing_tools --(no passes left)--> finalizing  status halted
    sampling --(model error)-----------> finalizing            status failed
    sampling --(answer not valid against the output schema)--> sampling   once, told what was wrong
    sampling --(answer still not valid)--> finalizing          status failed (`output_invalid`)

`drive` matches the steps exhaustively (pyright checks it), so a new step cannot go unhandled.
Timeouts and cancellation are applied around this by `agent/turns.py`.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from typing import Any, ClassVar

import anyio

from agent_server.agent import prompts
from agent_server.agent.approvals import ApprovalGate
from agent_server.agent.arguments import LOOP_ARGUMENTS_MAX_CHARS, bound_argument_nesting, calls_fit
from agent_server.agent.compaction import summary_message
from agent_server.agent.context import AgentDeps, TurnRequest
from agent_server.agent.preflight import maybe_compact
from agent_server.agent.stops import cut_answer, explain_cut_calls
from agent_server.agent.tool_calls import result_messages, run_tool_round
from agent_server.agent.turn_state import Phase, Reason, TurnState
from agent_server.agent.window import fit_between_rounds, fit_calls, over_threshold, result_budget
from agent_server.errors import MAX_TOOL_PASSES, OUTPUT_INVALID, ModelError
from agent_server.events import EventIds, EventSink, PromptTraceEvent, StatusEvent, TokenEvent, listening
from agent_server.llm.base import ModelRequest, ModelResponse
from agent_server.output_schema import parse_answer, repair_prompt, schema_instructions
from agent_server.settings import Settings
from agent_server.telemetry import Telemetry
from agent_server.tools.base import screens_calls
from agent_server.types import (
    ApprovalRecord,
    AssistantTurn,
    ErrorInfo,
    InstructionText,
    Message,
    ProjectGuidance,
    SessionHistory,
    TextPart,
    ToolCall,
    ToolResult,
    ToolRound,
    ToolSpec,
    TurnStatus,
)

logger = logging.getLogger(__name__)

NESTED_INSTRUCTIONS_MAX = 16
"""A turn is given at most this many subdirectories' instruction files (each cut at `instructions_max_bytes`)."""


@dataclass(frozen=True)
class NextStepRunTools:
    """The model asked for tools: run them."""

    response: ModelResponse
    kept: list[ToolCall]
    """The calls as the record, the history and the events keep them (`window.fit_calls`)."""
    kept_tokens: int
    """The estimated tokens of `kept` (computed with them: for large arguments, in a worker thread)."""
    phase: ClassVar[Phase] = "executing_tools"
    reason: ClassVar[Reason] = "assistant_requested_tools"


@dataclass(frozen=True)
class NextStepDecide:
    """A tool round finished: decide how the turn goes on."""

    phase: ClassVar[Phase] = "post_tool_decision"
    reason: ClassVar[Reason] = "tool_round_completed"


@dataclass(frozen=True)
class NextStepSample:
    """Sample the model again, with the tool results."""

    phase: ClassVar[Phase] = "sampling"
    reason: ClassVar[Reason] = "runtime_continuation_after_tools"


@dataclass(frozen=True)
class NextStepRepair:
    """The answer did not match the output schema: sample once more, told what was wrong."""

    problem: str
    phase: ClassVar[Phase] = "sampling"
    reason: ClassVar[Reason] = "answer_not_valid_against_output_schema"


@dataclass(frozen=True)
class NextStepFinish:
    """The turn ends with `status`."""

    reason: Reason
    status: TurnStatus
    final_text: str | None = None
    error: ErrorInfo | None = None
    structured_output: Any = None
    phase: ClassVar[Phase] = "finalizing"


NextStep = NextStepRunTools | NextStepDecide | NextStepSample | NextStepRepair | NextStepFinish


@dataclass(kw_only=True)
class _Run:
    deps: AgentDeps
    request: TurnRequest
    state: TurnState
    emit: EventSink
    tools: list[ToolSpec]
    gate: ApprovalGate
    messages: list[Message] = field(default_factory=list[Message])
    turn_start: int = 0
    """Where the turn's own messages (its prompt onwards) begin in `messages`."""
    tool_tokens: int = 0
    message_tokens: int = 0
    """The estimated tokens of `messages`, kept as they grow (so a round does not walk the whole request again)."""
    tool_round: int = 0
    """How many tool rounds have run."""
    instructed: set[str] = field(default_factory=lambda: {"."})
    """The directories whose instruction files the model has been given this turn (`.`: the system prompt's)."""
    repaired: bool = False
    """The model was asked once to correct an answer that did not match the output schema."""

    @property
    def ids(self) -> EventIds:
        return self.state.ids()

    async def status(self, phase: str, message: str) -> None:
        if listening(self.emit):
            await self.emit(StatusEvent(phase=phase, message=message, **self.ids))


async def drive(
    deps: AgentDeps, request: TurnRequest, state: TurnState, emit: EventSink, history: SessionHistory | None = None
) -> None:
    """Run the loop until the turn has a final status (set on `state`); `history` is the session's as the
    turn starts (loaded here when not given)."""
    tools = await deps.tools.list_tools()
    gate = ApprovalGate(
        settings=deps.settings,
        store=deps.store,
        session_id=request.session_id,
        channel=request.options.approvals,
        specs=deps.tools.list_tools,
        known={spec.name: spec for spec in tools},
        on_record=functools.partial(_record_approval, state, deps.telemetry),
        screen=deps.tools.screen if screens_calls(deps.tools) else None,
    )
    run = _Run(deps=deps, request=request, state=state, emit=emit, tools=tools, gate=gate)
    gate.on_asking = lambda message: run.status("executing_tools", message)
    await _prepare(run, history or await deps.store.load_history(state.record.session_id))
    phase: Phase = "sampling"
    step: NextStep = await _sample(run)
    while True:
        state.transition(phase, step.phase, step.reason)
        phase = step.phase
        match step:
            case NextStepRunTools(response=response, kept=kept, kept_tokens=kept_tokens):
                step = await _run_tools(run, response, kept, kept_tokens)
            case NextStepDecide():
                step = _decide_after_tools()
            case NextStepSample():
                step = await _sample(run)
            case NextStepRepair(problem=problem):
                step = await _repair(run, problem)
            case NextStepFinish(status=status, final_text=final_text, error=error, structured_output=output):
                state.finish(status, error=error, final_text=final_text, structured_output=output)
                return


def _record_approval(state: TurnState, telemetry: Telemetry, approval: ApprovalRecord) -> None:
    state.add_approval(approval)
    telemetry.approval(approval)


async def _prepare(run: _Run, history: SessionHistory) -> None:
    """Preflight compaction, then the system prompt, the live history and the user's prompt."""
    settings = run.deps.settings
    guidance = None if run.deps.project is None else await run.deps.project.guidance()
    if guidance is not None and guidance.instructions is not None:
        run.state.add_instructions([guidance.instructions.file])
    parts = await _prompt_parts(settings, guidance)
    if run.request.instructions is not None and run.request.instructions.body:
        parts.append(run.request.instructions)
    if run.request.notes:
        body = "\n".join(f"- {note}" for note in run.request.notes)
        parts.append(prompts.PromptPart(id="runtime", title="Runtime notes", source="server", body=body))
    schema = run.request.options.output_schema
    if schema is not None:
        body = schema_instructions(schema)
        parts.append(prompts.PromptPart(id="output", title="Output format", source="output_schema", body=body))
    system = prompts.render_system_prompt(parts)
    # Token estimates walk the whole history and every tool schema: compute each once per turn.
    tool_tokens = prompts.estimate_tool_tokens(run.tools)
    live_tokens = prompts.estimate_message_tokens(m.message for m in history.messages)
    record, compacted = await maybe_compact(
        run.deps, run.state, history, system=system, history_tokens=live_tokens, tool_tokens=tool_tokens, emit=run.emit
    )
    if record is not None:
        run.state.compacted(record)
    if compacted is not history:
        history = compacted
        live_tokens = prompts.estimate_message_tokens(m.message for m in history.messages)
    user = Message(role="user", content=run.request.prompt)
    framing = [summary_message(history.summary)] if history.summary else []
    run.messages = [Message(role="system", content=system), *framing, *(m.message for m in history.messages), user]
    run.turn_start = len(run.messages) - 1
    run.tool_tokens = tool_tokens
    history_tokens = live_tokens + prompts.estimate_message_tokens([*framing, user])
    run.message_tokens = history_tokens + prompts.estimate_message_tokens(run.messages[:1])
    run.state.commit([user])
    if listening(run.emit):
        trace = PromptTraceEvent(
            parts=prompts.trace_parts(parts), history_tokens=history_tokens, tool_schema_tokens=tool_tokens, **run.ids
        )
        await run.emit(trace)


async def _prompt_parts(settings: Settings, guidance: ProjectGuidance | None) -> list[prompts.PromptPart]:
    """The system prompt's parts. Prompt files are read from disk, so in a worker thread; without a prompt
    directory (the usual case: one `stat` on the loop) there is nothing to read and no thread hop."""
    if not (settings.workspace / prompts.PROMPTS_DIR).is_dir():
        return prompts.build_prompt_parts(None, settings.system_prompt, guidance)
    return await anyio.to_thread.run_sync(
        prompts.build_prompt_parts, settings.workspace, settings.system_prompt, guidance
    )


async def _sample(run: _Run) -> NextStepRunTools | NextStepRepair | NextStepFinish:
    """One model call: the tools it asks for, its answer, or its failure."""
    if run.tool_round and over_threshold(run.deps.settings, run.message_tokens, run.tool_tokens):
        run.messages = await fit_between_rounds(
            run.deps, run.state, run.messages, turn_start=run.turn_start, tool_tokens=run.tool_tokens, emit=run.emit
        )
        run.message_tokens = prompts.estimate_message_tokens(run.messages)
    await run.status("sampling", f"sampling (round {run.tool_round + 1})")
    options = run.request.options
    request = ModelRequest(
        messages=run.messages,
        tools=run.tools,
        model=options.model,
        session_id=run.state.record.session_id,
        output_schema=options.output_schema,
    )

    async def on_text(delta: str) -> None:
        if listening(run.emit):
            await run.emit(TokenEvent(delta=delta, **run.ids))

    async def on_retry(attempt: int, reason: str) -> None:
        await run.status("sampling", f"model attempt {attempt} failed: {reason}")

    started = anyio.current_time()
    try:
        response = await run.deps.llm.complete(request, on_text=on_text, on_retry=on_retry)
    except ModelError as exc:
        return NextStepFinish("model_failed", "failed", error=ErrorInfo(type=exc.type, message=exc.message))
    duration = anyio.current_time() - started
    response, kept, kept_tokens = await _record_response(run, explain_cut_calls(response), duration)
    if response.tool_calls:
        return NextStepRunTools(response, kept, kept_tokens)
    return await _answer(run, response)


async def _record_response(
    run: _Run, response: ModelResponse, duration_s: float
) -> tuple[ModelResponse, list[ToolCall], int]:
    """The response with its arguments' nesting bounded, added to the record (with how long the call took),
    its calls as the record keeps them and their estimated tokens."""
    kept: list[ToolCall] = []
    kept_tokens = 0
    if response.tool_calls:
        budget = result_budget(run.deps.settings, len(response.tool_calls))
        if calls_fit(response.tool_calls, LOOP_ARGUMENTS_MAX_CHARS):
            calls, kept, kept_tokens = _bound_and_fit(response.tool_calls, budget)
        else:  # a large input (a model's mistake, or hostile): walking it would hold the event loop
            calls, kept, kept_tokens = await anyio.to_thread.run_sync(_bound_and_fit, response.tool_calls, budget)
        response = response.model_copy(update={"tool_calls": calls})
    reasoning = response.reasoning if run.request.options.trace == "extended" else None
    phase = "initial" if run.tool_round == 0 else f"followup_{run.tool_round}"
    turn = AssistantTurn(
        phase=phase,
        text=response.text,
        tool_calls=kept,
        reasoning=reasoning,
        stop_reason=response.stop_reason,
        usage=response.usage,
        duration_s=round(duration_s, 3),
    )
    run.state.add_assistant_turn(turn, response.usage)
    if response.tool_calls_from_text:
        names = ", ".join(call.name for call in response.tool_calls)
        await run.status("sampling", f"the model wrote its tool call(s) as text; recovered from text: {names}")
        logger.info("turn %s: tool call(s) recovered from the answer's text: %s", run.state.record.turn_id, names)
    return response, kept, kept_tokens


def _bound_and_fit(calls: list[ToolCall], budget: int) -> tuple[list[ToolCall], list[ToolCall], int]:
    """The calls with their nesting bounded (as they run), as the record keeps them (`fit_calls`), and the
    estimated tokens of those."""
    bounded = bound_argument_nesting(calls)
    kept = fit_calls(bounded, budget)
    return bounded, kept, prompts.estimate_call_tokens(kept)


async def _answer(run: _Run, response: ModelResponse) -> NextStepRepair | NextStepFinish:
    """The final answer; one cut at the token limit ends the turn `truncated` (its `error` event and the
    result's text say so). With an output schema, an answer that does not match it is repaired once."""
    warning = _answer_warning(response)
    if warning is not None:
        await run.status("finalizing", f"warning: {warning}")
        logger.warning("turn %s: warning: %s", run.state.record.turn_id, warning)
    run.state.commit([Message(role="assistant", content=response.text, native=response.native)])
    cut = cut_answer(response)
    if cut is not None:
        return NextStepFinish("assistant_cut_at_token_limit", "truncated", final_text=response.text, error=cut)
    schema = run.request.options.output_schema
    if schema is None:
        return NextStepFinish("assistant_finished_without_tools", "completed", final_text=response.text)
    # In a worker thread: a schema's patterns may take up to their time limit (`output_schema.PATTERN_TIMEOUT_S`).
    value, problem = await anyio.to_thread.run_sync(parse_answer, response.text, schema)
    if problem is None:
        done = "assistant_finished_without_tools"
        return NextStepFinish(done, "completed", final_text=response.text, structured_output=value)
    if not run.repaired:
        return NextStepRepair(problem)
    error = ErrorInfo(type=OUTPUT_INVALID, message=f"the final answer does not match the output schema: {problem}")
    return NextStepFinish("output_invalid", "failed", final_text=response.text, error=error)


async def _repair(run: _Run, problem: str) -> NextStepRunTools | NextStepRepair | NextStepFinish:
    """Tell the model what was wrong with its answer and sample once more (the only repair round)."""
    run.repaired = True
    await run.status("sampling", f"the answer does not match the output schema, asking for a correction: {problem}")
    correction = Message(role="user", content=repair_prompt(problem))
    answer = run.state.committed[-1]  # the answer `_answer` kept, as the model wrote it
    run.messages += [answer, correction]
    run.state.commit([correction])
    return await _sample(run)


def _answer_warning(response: ModelResponse) -> str | None:
    if response.stop_reason == "content_filter":
        return "the provider stopped the model's answer (content filter or refusal)"
    if not response.text.strip() and response.stop_reason != "max_tokens":
        return "the model's final answer is empty"
    return None


async def _run_tools(
    run: _Run, response: ModelResponse, kept: list[ToolCall], kept_tokens: int
) -> NextStepDecide | NextStepFinish:
    """One tool round, unless the turn has used all its tool passes."""
    passes = run.request.max_tool_passes
    if run.tool_round >= passes:
        message = f"the model still asked for tools after {passes} tool round(s) (max_tool_passes={passes})"
        return NextStepFinish(
            "max_tool_passes_reached", "halted", error=ErrorInfo(type=MAX_TOOL_PASSES, message=message)
        )
    run.tool_round += 1
    tool_round = run.tool_round
    await run.status("executing_tools", f"running {len(response.tool_calls)} tool call(s) (round {tool_round})")
    budget = result_budget(run.deps.settings, len(response.tool_calls))
    # `kept` is what the history and the record keep; the calls run whole
    assistant = Message(role="assistant", content=response.text, tool_calls=kept, native=response.native)
    results = await run_tool_round(
        run.deps.tools,
        response.tool_calls,
        tool_round=tool_round,
        emit=run.emit,
        ids=run.ids,
        max_chars=budget,
        shown=kept,
        gate=run.gate,
        telemetry=run.deps.telemetry,
        kinds={spec.name: spec.kind for spec in run.tools},
    )
    results = _with_nested_instructions(run, results)
    step = [assistant, *result_messages(results)]
    run.messages += step
    text_only = assistant.model_copy(update={"tool_calls": []})
    run.message_tokens += kept_tokens + prompts.estimate_message_tokens([text_only, *step[1:]])
    run.state.commit(step)
    run.state.add_tool_round(ToolRound(tool_round=tool_round, requested_tools=kept, tool_results=results))
    return NextStepDecide()


def _with_nested_instructions(run: _Run, results: list[ToolResult]) -> list[ToolResult]:
    """The results, each built-in tool's followed by the instruction files of the subdirectories it touched that
    the turn has not had yet (`tools.instructions`: the system prompt stays as it is), at most
    `NESTED_INSTRUCTIONS_MAX` per turn. The tool looked them up in its own worker thread
    (`ToolResult.found_instructions`)."""
    if run.deps.project is None:
        return results
    out: list[ToolResult] = []
    for result in results:
        room = NESTED_INSTRUCTIONS_MAX - (len(run.instructed) - 1)
        new = [text for text in result.found_instructions or () if text.file.applies_to not in run.instructed]
        found = new[: max(room, 0)]
        if found:
            run.instructed.update(text.file.applies_to for text in found)
            run.state.add_instructions([text.file for text in found])
            notes = [TextPart(text=_nested_note(text)) for text in found]
            result = result.model_copy(update={"content": [*result.content, *notes]})
        out.append(result)
    return out


def _nested_note(text: InstructionText) -> str:
    return f"[Instructions for work under {text.file.applies_to}/, from {text.file.path}:]\n{text.text}"


def _decide_after_tools() -> NextStepSample:
    """After a tool round the model always gets the results (the place for a future approval or stop)."""
    return NextStepSample()
