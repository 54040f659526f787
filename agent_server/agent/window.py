"""Keeping a turn's requests inside the model's context window.

Two decisions live here, each in one place:

- `result_budget`: how many characters of text one tool result may put into the prompt. One
  round's results share `tool_result_max_share` of `context_window` (estimated at
  `CHARS_PER_TOKEN`); `fit_result` cuts a longer result with a note saying how to get the rest.
  The cut result is also what the turn record and the session history keep. A call's arguments are
  kept within the same budget (`fit_calls`), though the call itself runs with all of them.
- `fit_between_rounds`: before a follow-up sampling whose estimated request would cross the
  compaction threshold, the session's stored history is compacted (as before the first sampling);
  if the turn's own messages still do not fit, its oldest tool results are elided from the
  request (the history keeps them, so the next turn's compaction summarises them).
"""

from __future__ import annotations

import json

from agent_server.agent import prompts
from agent_server.agent.compaction import should_compact, summary_message
from agent_server.agent.context import AgentDeps
from agent_server.agent.preflight import maybe_compact
from agent_server.agent.turn_state import TurnState
from agent_server.events import EventSink, StatusEvent
from agent_server.presentation import cap_arguments
from agent_server.settings import Settings
from agent_server.types import ContentPart, Message, SessionHistory, TextPart, ToolCall, ToolResult

MIN_RESULT_CHARS = 1_000
"""However small the window, a result keeps this much: a note alone tells the model nothing."""


def result_budget(settings: Settings, calls: int) -> int:
    """Characters of text each of `calls` results of one round may put into the prompt."""
    round_chars = int(settings.context_window * settings.tool_result_max_share * prompts.CHARS_PER_TOKEN)
    return max(MIN_RESULT_CHARS, round_chars // max(1, calls))


def fit_result(result: ToolResult, max_chars: int) -> ToolResult:
    """`result` with its text cut to `max_chars` characters in all, and a note saying what was cut.

    The longest text parts give way first, so short ones (such as a note of the tool's own on what it
    cut already) survive. A result with only structured content reaches the model as its JSON: that
    text is cut then.
    """
    total = sum(len(part.text) for part in result.content if isinstance(part, TextPart))
    if total == 0 and result.structured is not None:
        text = json.dumps(result.structured, ensure_ascii=False)
        if len(text) > max_chars:
            result = result.model_copy(update={"content": [*result.content, TextPart(text=text)]})
            total = len(text)
    if total <= max_chars:
        return result
    content = _shorten_longest(list(result.content), total - max_chars)
    note = (
        f"[truncated to fit the model's context window: this result has {total} characters of text, "
        f"cut to {max_chars} (its longest parts lose their ends); ask for less, e.g. read_file with "
        "offset/limit or a narrower query]"
    )
    content.append(TextPart(text=note))
    return result.model_copy(update={"content": content})


def fit_calls(calls: list[ToolCall], max_chars: int) -> list[ToolCall]:
    """`calls` as the record, the history and the events keep them: each call's arguments within about
    `max_chars` characters of JSON, the longest values cut first, each cut one ending with a marker that
    says how much was cut and that the call ran with the whole value (`presentation.cap_arguments`)."""
    return [_fit_call(call, max_chars) for call in calls]


def _fit_call(call: ToolCall, max_chars: int) -> ToolCall:
    arguments = cap_arguments(call.arguments, max_chars)
    return call if arguments is call.arguments else call.model_copy(update={"arguments": arguments})


def _shorten_longest(content: list[ContentPart], excess: int) -> list[ContentPart]:
    """`content` with `excess` characters cut from the ends of its longest text parts."""
    texts = {i: part.text for i, part in enumerate(content) if isinstance(part, TextPart)}
    while excess > 0:
        index = max(texts, key=lambda i: len(texts[i]))
        cut = min(excess, len(texts[index]))
        texts[index] = texts[index][: len(texts[index]) - cut]
        excess -= cut
    return [TextPart(text=texts[i]) if i in texts else part for i, part in enumerate(content) if texts.get(i, True)]


def over_threshold(settings: Settings, messages: list[Message] | int, tool_tokens: int) -> bool:
    """Whether the estimated request (messages, or their estimated tokens, and tool schemas) crosses the
    compaction threshold."""
    return should_compact(
        system_tokens=0,
        history_tokens=messages if isinstance(messages, int) else prompts.estimate_message_tokens(messages),
        tool_tokens=tool_tokens,
        context_window=settings.context_window,
        threshold=settings.compact_threshold,
    )


async def fit_between_rounds(
    deps: AgentDeps,
    state: TurnState,
    messages: list[Message],
    *,
    turn_start: int,
    tool_tokens: int,
    emit: EventSink,
) -> list[Message]:
    """The request's messages made to fit, as far as compaction and elision can (see the module docstring).

    `messages` are the system prompt, the summary and stored history, then from `turn_start` the
    turn's own messages.
    """
    if not over_threshold(deps.settings, messages, tool_tokens):
        return messages
    turn = messages[turn_start:]
    history = await deps.store.load_history(state.record.session_id)
    record, compacted = await maybe_compact(
        deps,
        state,
        history,
        system=messages[0].text(),
        history_tokens=prompts.estimate_message_tokens(m.message for m in history.messages),
        tool_tokens=tool_tokens,
        emit=emit,
        turn_tokens=prompts.estimate_message_tokens(turn),
    )
    if record is not None:
        state.compacted(record)
        messages = [messages[0], *_live(compacted), *turn]
        turn_start = len(messages) - len(turn)
    return await _elide_oldest_results(deps.settings, state, messages, turn_start, tool_tokens, emit)


def _live(history: SessionHistory) -> list[Message]:
    framing = [summary_message(history.summary)] if history.summary else []
    return [*framing, *(stored.message for stored in history.messages)]


async def _elide_oldest_results(
    settings: Settings,
    state: TurnState,
    messages: list[Message],
    turn_start: int,
    tool_tokens: int,
    emit: EventSink,
) -> list[Message]:
    """Replace the turn's tool results, oldest first and never the last round's, until the request fits."""
    last_round = max((i for i, m in enumerate(messages) if m.role == "assistant" and m.tool_calls), default=0)
    out = list(messages)
    elided = 0
    for index in range(turn_start, last_round):
        if not over_threshold(settings, out, tool_tokens):
            break
        message = out[index]
        if message.role == "tool":
            size = len(message.text())
            note = f"[tool result elided to fit the context window ({size} characters); call the tool again if needed]"
            out[index] = message.model_copy(update={"content": note})
            elided += 1
    if elided:
        text = f"{elided} earlier tool result(s) of this turn elided from the request to fit the context window"
        await emit(StatusEvent(phase="compact", message=text, **state.ids()))
    return out
