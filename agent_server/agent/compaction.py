"""Compaction: fold a session's older messages into a summary so the history fits the window.

The pieces are small and composable; the loop and the `compact` tool put them together:

1. `should_compact` decides from estimated tokens (before sampling: at the start of a turn and
   between its tool rounds).
2. `split_for_compaction` picks the messages to fold and the recent ones to keep verbatim (within
   `keep_budget` tokens, so an oversized recent message is folded, not kept whole), never
   separating a tool result from the assistant message that asked for it.
3. `summarize` asks the model for the summary, with the previous summary as input, and falls
   back to a deterministic summary when the model fails, so the session stays usable.
4. `summary_message` is what the loop puts before the live history in the next request.

Nothing here touches the store: the caller saves the record and archives the folded messages.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from agent_server.agent.prompts import estimate_message_tokens
from agent_server.errors import ModelError
from agent_server.llm.base import LLMClient, ModelRequest
from agent_server.types import CompactionRecord, ImagePart, Message, StoredMessage, utc_now

logger = logging.getLogger(__name__)

SUMMARY_PREFIX = "Summary of the earlier conversation (compacted):"
TRANSCRIPT_MESSAGE_MAX_CHARS = 2_000
"""Each message's text is cut to this length in the transcript sent to the model."""
TOOL_ARGUMENTS_MAX_CHARS = 300
FALLBACK_ITEM_CHARS = 200
FALLBACK_LIST_MAX_CHARS = 4_000
FALLBACK_PREVIOUS_MAX_CHARS = 8_000
"""A fallback keeps at most this much of the previous summary (its end), so repeated fallbacks stay bounded."""

SYSTEM_INSTRUCTIONS = """\
You compact the history of a conversation between a user and an AI agent that works in a \
workspace through tools. Write a summary that replaces the earlier messages: the agent will \
continue from your summary plus the most recent messages, and will not see the originals again.

Keep what the agent needs to continue: the user's goals, requests and preferences; decisions \
made and why; facts learned (file paths, names, values, errors, tool results that matter); work \
done and work still open. Fold the previous summary in, if there is one; drop chit-chat and \
superseded details. Be concise and factual; use short sections or bullet points. Reply with the \
summary only."""


KEEP_SHARE = 0.5
"""The messages kept verbatim by a compaction take at most this share of the compaction threshold."""


def keep_budget(context_window: int, threshold: float) -> int:
    """Estimated tokens the preserved messages of a compaction may take."""
    return int(context_window * threshold * KEEP_SHARE)


def should_compact(
    *, system_tokens: int, history_tokens: int, tool_tokens: int, context_window: int, threshold: float
) -> bool:
    """True when the estimated prompt exceeds `threshold` of the context window."""
    return system_tokens + history_tokens + tool_tokens > context_window * threshold


def split_for_compaction(
    messages: list[StoredMessage], keep_last: int, *, keep_tokens: int | None = None
) -> tuple[list[StoredMessage], list[StoredMessage]]:
    """Split history into (to_compact, preserved), preserving about the last `keep_last` messages.

    With `keep_tokens`, the preserved messages also fit in that many estimated tokens: a recent
    message too big for it is folded into the summary (its transcript entry is clipped) instead of
    being kept whole, and so is everything before it.

    A tool result always stays with the assistant message that requested it: when the count ends the
    preserved run at a `tool` result, the boundary moves earlier to include the request; when the
    token budget does, it moves later, folding the request and its results together.
    """
    boundary = max(0, len(messages) - max(0, keep_last))
    by_tokens = _token_boundary(messages, keep_tokens) if keep_tokens is not None else 0
    if by_tokens > boundary:
        boundary = by_tokens
        while boundary < len(messages) and messages[boundary].message.role == "tool":
            boundary += 1
        return messages[:boundary], messages[boundary:]
    while 0 < boundary < len(messages) and messages[boundary].message.role == "tool":
        boundary -= 1
    return messages[:boundary], messages[boundary:]


def _token_boundary(messages: list[StoredMessage], keep_tokens: int) -> int:
    """The first index of the longest run of last messages whose estimated tokens fit `keep_tokens`."""
    used = 0
    for index in range(len(messages) - 1, -1, -1):
        used += estimate_message_tokens([messages[index].message])
        if used > keep_tokens:
            return index + 1
    return 0


def summary_message(summary: str) -> Message:
    """The synthetic message that stands for the compacted history, before the live messages."""
    return Message(role="user", content=f"{SUMMARY_PREFIX}\n\n{summary}")


async def summarize(
    llm: LLMClient,
    *,
    to_compact: Sequence[StoredMessage],
    preserved: Sequence[StoredMessage],
    previous_summary: str | None,
    reason: str,
    instructions: str | None = None,
    model: str | None = None,
    dry_run: bool = False,
) -> CompactionRecord:
    """Summarize `to_compact` (with the previous summary) into a compaction record.

    Asks the model (purpose `compaction`, no tools). If it raises `ModelError` or answers with
    empty text, the summary is a deterministic one (mode `fallback`, `error` says why).
    Cancellation propagates. Token counts are estimates: before = previous summary and all
    messages, after = the new summary and the preserved messages.
    """
    summary, error = await _model_summary(llm, _summary_request(to_compact, previous_summary, instructions), model)
    if error is not None:
        logger.warning("compaction summary from the model failed, using the fallback: %s", error)
        summary = fallback_summary(to_compact, previous_summary)
    before = [
        *([summary_message(previous_summary)] if previous_summary else []),
        *_plain(to_compact),
        *_plain(preserved),
    ]
    return CompactionRecord(
        summary=summary,
        mode="llm" if error is None else "fallback",
        compacted_message_count=len(to_compact),
        preserved_message_count=len(preserved),
        estimated_tokens_before=estimate_message_tokens(before),
        estimated_tokens_after=estimate_message_tokens([summary_message(summary), *_plain(preserved)]),
        reason=reason,
        created_at=utc_now(),
        dry_run=dry_run,
        error=error,
    )


async def _model_summary(llm: LLMClient, prompt: str, model: str | None) -> tuple[str, str | None]:
    """(summary, None) from the model, or ("", why it failed)."""
    request = ModelRequest(
        messages=[Message(role="system", content=SYSTEM_INSTRUCTIONS), Message(role="user", content=prompt)],
        model=model,
        purpose="compaction",
    )
    try:
        summary = (await llm.complete(request)).text.strip()
    except ModelError as exc:
        return "", exc.message
    return (summary, None) if summary else ("", "the model returned an empty summary")


def fallback_summary(to_compact: Sequence[StoredMessage], previous_summary: str | None) -> str:
    """A summary without the model: the previous summary, then a bounded list of the folded messages."""
    sections: list[str] = []
    if previous_summary:
        previous = previous_summary.strip()
        if len(previous) > FALLBACK_PREVIOUS_MAX_CHARS:
            previous = "[earlier summary truncated]\n" + previous[-FALLBACK_PREVIOUS_MAX_CHARS:]
        sections.append(previous)
    lines: list[str] = []
    used = 0
    for position, stored in enumerate(to_compact):
        line = f"- {_label(stored.message)}: {_clip(_flat_text(stored.message), FALLBACK_ITEM_CHARS)}"
        if used + len(line) > FALLBACK_LIST_MAX_CHARS:
            lines.append(f"- ... and {len(to_compact) - position} more messages")
            break
        lines.append(line)
        used += len(line) + 1
    if lines:
        sections.append("Earlier messages (the model summary was unavailable):\n" + "\n".join(lines))
    return "\n\n".join(sections) or "(no earlier conversation)"


def _summary_request(to_compact: Sequence[StoredMessage], previous: str | None, instructions: str | None) -> str:
    sections: list[str] = []
    if previous:
        sections.append(f"<previous_summary>\n{previous.strip()}\n</previous_summary>")
    transcript = "\n\n".join(_transcript_entry(stored.message) for stored in to_compact)
    sections.append(f"<conversation>\n{transcript or '(no messages)'}\n</conversation>")
    if instructions and instructions.strip():
        sections.append(
            f"<instructions>\nThe summary must also follow these instructions:\n{instructions.strip()}\n</instructions>"
        )
    sections.append("Write the new summary now.")
    return "\n\n".join(sections)


def _transcript_entry(message: Message) -> str:
    lines = [f"{_label(message)}: {_clip(_text_with_images(message), TRANSCRIPT_MESSAGE_MAX_CHARS)}"]
    for call in message.tool_calls:
        arguments = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
        lines.append(f"  -> {call.name}({_clip(arguments, TOOL_ARGUMENTS_MAX_CHARS)})")
    return "\n".join(lines)


def _label(message: Message) -> str:
    if message.role == "tool":
        return f"tool {message.name}" if message.name else "tool"
    return message.role


def _text_with_images(message: Message) -> str:
    if isinstance(message.content, str):
        return message.content
    return "\n".join("[image]" if isinstance(part, ImagePart) else part.text for part in message.content)


def _flat_text(message: Message) -> str:
    text = " ".join(_text_with_images(message).split())
    if message.tool_calls:
        text += f" [called {', '.join(call.name for call in message.tool_calls)}]"
    return text.strip() or "(empty)"


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"


def _plain(messages: Sequence[StoredMessage]) -> list[Message]:
    return [stored.message for stored in messages]
