"""The sampling and tool-round loop of one turn: a small state machine.

    sampling --(answer without tools)--> finalizing            status completed
    sampling --(tools requested)-------> executing_tools --> post_tool_decision --> sampling
                                         (the request is fitted to the window again: `window.py`)
    sampling --(tools requested, no passes left)--> finalizing status halted
    sampling --(model error)-----------> finalizing            status failed

Timeouts and cancellation are applied around this by `agent/turns.py`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import anyio

from agent_server.agent import prompts
from agent_server.agent.arguments import bound_argument_nesting
from agent_server.agent.compaction import summary_message
from agent_server.agent.context import AgentDeps, TurnRequest
from agent_server.agent.preflight import maybe_compact
from agent_server.agent.tool_calls import result_messages, run_tool_round
from agent_server.agent.turn_state import TurnState
from agent_server.agent.window import fit_between_rounds, result_budget
from agent_server.errors import ModelError
from agent_server.events import EventIds, EventSink, PromptTraceEvent, StatusEvent, TokenEvent
from agent_server.llm.base import ModelRequest, ModelResponse
from agent_server.types import AssistantTurn, ErrorInfo, Message, ToolRound, ToolSpec

logger = logging.getLogger(__name__)


@dataclass(kw_only=True)
class _Run:
    deps: AgentDeps
    request: TurnRequest
    state: TurnState
    emit: EventSink
    tools: list[ToolSpec]
    messages: list[Message] = field(default_factory=list[Message])
    turn_start: int = 0
    """Where the turn's own messages (its prompt onwards) begin in `messages`."""
    tool_tokens: int = 0

    @property
    def ids(self) -> EventIds:
        return self.state.ids()

    async def status(self, phase: str, message: str) -> None:
        await self.emit(StatusEvent(phase=phase, message=message, **self.ids))


async def drive(deps: AgentDeps, request: TurnRequest, state: TurnState, emit: EventSink) -> None:
    """Run the loop until the turn has a final status (set on `state`)."""
    run = _Run(deps=deps, request=request, state=state, emit=emit, tools=await deps.tools.list_tools())
    await _prepare(run)
    tool_round = 0
    while True:
        if tool_round:
            run.messages = await fit_between_rounds(
                deps, state, run.messages, turn_start=run.turn_start, tool_tokens=run.tool_tokens, emit=emit
            )
        await run.status("sampling", f"sampling (round {tool_round + 1})")
        response = await _sample(run, tool_round)
        if response is None:
            return
        if not response.tool_calls:
            await _finish_with_answer(run, response)
            return
        state.transition("sampling", "executing_tools", "assistant_requested_tools")
        if tool_round >= request.max_tool_passes:
            _halt(run)
            return
        tool_round += 1
        await _tool_round(run, response, tool_round)


async def _prepare(run: _Run) -> None:
    """Preflight compaction, then the system prompt, the live history and the user's prompt."""
    settings = run.deps.settings
    # Prompt files are read from disk: keep the event loop free while they are.
    parts = await anyio.to_thread.run_sync(prompts.build_prompt_parts, settings.workspace, settings.system_prompt)
    if run.request.notes:
        body = "\n".join(f"- {note}" for note in run.request.notes)
        parts.append(prompts.PromptPart(id="runtime", title="Runtime notes", source="server", body=body))
    system = prompts.render_system_prompt(parts)
    # Token estimates walk the whole history and every tool schema: compute each once per turn.
    tool_tokens = prompts.estimate_tool_tokens(run.tools)
    history = await run.deps.store.load_history(run.state.session_id)
    live_tokens = prompts.estimate_message_tokens(m.message for m in history.messages)
    record, compacted = await maybe_compact(
        run.deps, run.state, history, system=system, history_tokens=live_tokens, tool_tokens=tool_tokens, emit=run.emit
    )
    run.state.compaction = record
    if compacted is not history:
        history = compacted
        live_tokens = prompts.estimate_message_tokens(m.message for m in history.messages)
    user = Message(role="user", content=run.request.prompt)
    framing = [summary_message(history.summary)] if history.summary else []
    run.messages = [Message(role="system", content=system), *framing, *(m.message for m in history.messages), user]
    run.turn_start = len(run.messages) - 1
    run.tool_tokens = tool_tokens
    run.state.committed.append(user)
    await run.emit(
        PromptTraceEvent(
            parts=prompts.trace_parts(parts),
            history_tokens=live_tokens + prompts.estimate_message_tokens([*framing, user]),
            tool_schema_tokens=tool_tokens,
            **run.ids,
        )
    )


async def _sample(run: _Run, tool_round: int) -> ModelResponse | None:
    """One model call; None when it failed (the turn is then finished as `failed`)."""
    request = ModelRequest(messages=run.messages, tools=run.tools, model=run.request.model)

    async def on_text(delta: str) -> None:
        await run.emit(TokenEvent(delta=delta, **run.ids))

    async def on_retry(attempt: int, reason: str) -> None:
        await run.status("sampling", f"model attempt {attempt} failed: {reason}")

    try:
        response = await run.deps.llm.complete(request, on_text=on_text, on_retry=on_retry)
    except ModelError as exc:
        run.state.transition("sampling", "finalizing", "model_failed")
        run.state.finish("failed", error=ErrorInfo(type=exc.type, message=exc.message))
        return None
    response = response.model_copy(update={"tool_calls": bound_argument_nesting(response.tool_calls)})
    run.state.usage = run.state.usage + response.usage
    reasoning = response.reasoning if run.request.trace == "extended" else None
    phase = "initial" if tool_round == 0 else f"followup_{tool_round}"
    run.state.assistant_turns.append(
        AssistantTurn(phase=phase, text=response.text, tool_calls=response.tool_calls, reasoning=reasoning)
    )
    if response.tool_calls_from_text:
        names = ", ".join(call.name for call in response.tool_calls)
        await run.status("sampling", f"the model wrote its tool call(s) as text; recovered from text: {names}")
        logger.info("turn %s: tool call(s) recovered from the answer's text: %s", run.state.turn_id, names)
    return response


async def _finish_with_answer(run: _Run, response: ModelResponse) -> None:
    if not response.text.strip():
        message = "warning: the model's final answer is empty"
        await run.status("finalizing", message)
        logger.warning("turn %s: %s", run.state.turn_id, message)
    run.state.transition("sampling", "finalizing", "assistant_finished_without_tools")
    run.state.committed.append(Message(role="assistant", content=response.text))
    run.state.finish("completed", final_text=response.text)


def _halt(run: _Run) -> None:
    passes = run.request.max_tool_passes
    run.state.transition("executing_tools", "finalizing", "max_tool_passes_reached")
    message = f"the model still asked for tools after {passes} tool round(s) (max_tool_passes={passes})"
    run.state.finish("halted", error=ErrorInfo(type="max_tool_passes", message=message))


async def _tool_round(run: _Run, response: ModelResponse, tool_round: int) -> None:
    await run.status("executing_tools", f"running {len(response.tool_calls)} tool call(s) (round {tool_round})")
    assistant = Message(role="assistant", content=response.text, tool_calls=response.tool_calls)
    results = await run_tool_round(
        run.deps.tools,
        response.tool_calls,
        tool_round=tool_round,
        emit=run.emit,
        ids=run.ids,
        max_chars=result_budget(run.deps.settings, len(response.tool_calls)),
    )
    step = [assistant, *result_messages(results)]
    run.messages += step
    run.state.committed += step
    run.state.tool_rounds.append(
        ToolRound(tool_round=tool_round, requested_tools=response.tool_calls, tool_results=results)
    )
    run.state.transition("executing_tools", "post_tool_decision", "tool_round_completed")
    run.state.transition("post_tool_decision", "sampling", "runtime_continuation_after_tools")
