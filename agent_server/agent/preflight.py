"""Compacting a session: on request (the `compact` tool) and before sampling under token pressure."""

from __future__ import annotations

import functools
import logging

from agent_server.agent import prompts
from agent_server.agent.compaction import keep_budget, should_compact, split_for_compaction, summarize
from agent_server.agent.context import AgentDeps
from agent_server.agent.turn_state import TurnState
from agent_server.errors import CompactionConflict
from agent_server.events import CompactionEvent, EventIds, EventSink, StatusEvent
from agent_server.settings import Settings
from agent_server.types import CompactionRecord, Message, SessionHistory, utc_now

logger = logging.getLogger(__name__)

COMPACTION_ATTEMPTS = 3
"""How often one compaction is computed when other processes keep compacting the same session."""


async def compact_session(
    deps: AgentDeps,
    session_id: str,
    *,
    keep_last: int,
    instructions: str | None,
    reason: str,
    dry_run: bool,
    emit: EventSink,
    ids: EventIds,
) -> CompactionRecord:
    """Summarise all but the last `keep_last` messages; archive them unless `dry_run`.

    The kept messages must also fit `keep_budget` of the context window: a recent message too big
    for it is summarised rather than kept whole. With nothing to compact, returns a record with
    `compacted_message_count == 0` and stores nothing. When another process compacted the session
    between loading its history and saving (the store refuses with `CompactionConflict`), the
    compaction is computed again from the new state, up to `COMPACTION_ATTEMPTS` times in all; then
    the conflict propagates.
    """
    once = functools.partial(
        _compact_once, deps, session_id, keep_last, instructions, reason=reason, dry_run=dry_run, emit=emit, ids=ids
    )
    attempt = 1
    with deps.telemetry.compaction(session_id, reason) as traced:
        while True:
            try:
                record = await once()
            except CompactionConflict:
                if attempt == COMPACTION_ATTEMPTS:
                    raise
                attempt += 1
                logger.info("session %s was compacted by another process meanwhile; compacting it again", session_id)
                continue
            traced.ended(record)
            return record


async def _compact_once(
    deps: AgentDeps,
    session_id: str,
    keep_last: int,
    instructions: str | None,
    *,
    reason: str,
    dry_run: bool,
    emit: EventSink,
    ids: EventIds,
) -> CompactionRecord:
    history = await deps.store.load_history(session_id)
    budget = keep_budget(deps.settings.context_window, deps.settings.compact_threshold)
    to_compact, preserved = split_for_compaction(history.messages, keep_last, keep_tokens=budget)
    if not to_compact:
        return _nothing_to_compact(history.summary, [m.message for m in preserved], reason, dry_run)
    record = await summarize(
        deps.llm,
        to_compact=to_compact,
        preserved=preserved,
        previous_summary=history.summary,
        instructions=instructions,
        reason=reason,
        dry_run=dry_run,
    )
    if not dry_run:
        through, first = to_compact[-1].seq, to_compact[0].seq
        await deps.store.save_compaction(session_id, record, archive_through_seq=through, live_from_seq=first)
    await emit(CompactionEvent(record=record, **ids))
    return record


async def maybe_compact(
    deps: AgentDeps,
    state: TurnState,
    history: SessionHistory,
    *,
    system: str,
    history_tokens: int,
    tool_tokens: int,
    emit: EventSink,
    turn_tokens: int | None = None,
) -> tuple[CompactionRecord | None, SessionHistory]:
    """Compact the session when the estimated next request crosses the configured threshold.

    `history_tokens` are the live messages' estimated tokens, `tool_tokens` the tool schemas'
    (the caller has them already); `turn_tokens` those of the turn's own messages so far (by
    default its prompt: before the first sampling). Returns the compaction record (None when none
    ran) and the session's history after it.
    """
    turn = prompts.estimate_tokens(state.record.prompt) if turn_tokens is None else turn_tokens
    live = history_tokens + prompts.estimate_tokens(history.summary or "") + turn
    if not _over(deps.settings, system_tokens=prompts.estimate_tokens(system), live=live, tool_tokens=tool_tokens):
        return None, history
    ids = state.ids()
    when = "before sampling" if turn_tokens is None else "between tool rounds"
    await emit(StatusEvent(phase="compact", message=f"compacting context {when}", **ids))
    try:
        record = await compact_session(
            deps,
            state.record.session_id,
            keep_last=deps.settings.compact_keep_last,
            instructions=None,
            reason="token-pressure",
            dry_run=False,
            emit=emit,
            ids=ids,
        )
    except CompactionConflict:
        # Other processes keep compacting this session, so it is shrinking already: go on with it.
        return None, await deps.store.load_history(state.record.session_id)
    if not record.compacted_message_count:
        return None, history
    return record, await deps.store.load_history(state.record.session_id)


def _over(settings: Settings, *, system_tokens: int, live: int, tool_tokens: int) -> bool:
    return should_compact(
        system_tokens=system_tokens,
        history_tokens=live,
        tool_tokens=tool_tokens,
        context_window=settings.context_window,
        threshold=settings.compact_threshold,
    )


def _nothing_to_compact(summary: str | None, preserved: list[Message], reason: str, dry_run: bool) -> CompactionRecord:
    tokens = prompts.estimate_message_tokens(preserved) + prompts.estimate_tokens(summary or "")
    return CompactionRecord(
        summary=summary or "",
        mode="fallback",
        compacted_message_count=0,
        preserved_message_count=len(preserved),
        estimated_tokens_before=tokens,
        estimated_tokens_after=tokens,
        reason=f"{reason}: nothing to compact",
        created_at=utc_now(),
        dry_run=dry_run,
    )
