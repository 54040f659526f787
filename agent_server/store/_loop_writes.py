"""Which of SqliteStore's writes may run on the event loop, and how one falls back to a worker thread.

The rule is that nothing holds the event loop for more than 1 ms (`bench/loop_lag.py` measures it). A
turn's start and end are small transactions in the usual case (a few rows, a few KiB of JSON), and a hop
to a worker thread costs several times what SQLite does for them, so they run on the loop when:

- their payload is small: `turn_fits` estimates it without serialising anything (a walk that stops as soon
  as the budget, `LOOP_WRITE_MAX_CHARS`, is spent, so the estimate itself is cheap whatever the record
  holds), and the history `begin_turn` reads stops at the same budget (`HistoryTooLarge`; the session is then
  remembered, `LargeHistories`, and its next turns begin in the thread at once);
- the database is free at once: the attempt runs with `busy_timeout = 0`, so a write lock held by another
  process (or by this store's own worker thread) is `SQLITE_BUSY` at once (`is_busy`), never a wait;
- no checkpoint runs on the loop: the connection's automatic checkpoint is off, and the store checkpoints
  in a worker thread, on a connection of its own, every `sqlite.CHECKPOINT_EVERY_WRITES` writes.

Anything else (a busy database, a large payload) runs the same transaction in a worker thread as before,
with the normal `busy_timeout`. Durability is unchanged: WAL with `synchronous = NORMAL` (a commit writes
the WAL without an fsync; the checkpoint fsyncs, in the thread).
"""

from __future__ import annotations

import sqlite3

from agent_server.nesting import chars_left as _value
from agent_server.types import ContentPart, Message, TextPart, ToolCall, ToolResult, TurnRecord

LOOP_WRITE_MAX_CHARS = 32_768
"""The most characters of JSON (estimated) one transaction may write or read on the event loop: about
0.1-0.2 ms of SQLite and pydantic work, far below the 1 ms rule."""
_NODE_CHARS = 16
"""What a message or call counts at least, beyond its text."""
_RECORD_ITEM_CHARS = 256
"""What one transition or approval of a record counts (small fixed-shape objects)."""


class HistoryTooLarge(Exception):
    """A history read on the event loop passed `LOOP_WRITE_MAX_CHARS`: the transaction is rolled back and run
    in a worker thread instead."""


LARGE_HISTORIES_KEPT = 1_024
"""How many sessions `LargeHistories` remembers (the least recently begun are forgotten first)."""


class LargeHistories:
    """The sessions whose history passed `LOOP_WRITE_MAX_CHARS` when a turn began: their next turns begin in a
    worker thread at once, instead of reading up to the budget on the loop, rolling back and starting again
    (a history only grows until a compaction, and a long session is the usual one). Bounded: a session
    forgotten, or compacted since, costs one attempt on the loop again."""

    def __init__(self, kept: int = LARGE_HISTORIES_KEPT) -> None:
        self._kept = kept
        self._sessions: dict[str, None] = {}  # insertion order: the least recently remembered first

    def __contains__(self, session_id: str) -> bool:
        return session_id in self._sessions

    def remember(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
        self._sessions[session_id] = None
        if len(self._sessions) > self._kept:
            del self._sessions[next(iter(self._sessions))]


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether `exc` is SQLite's `SQLITE_BUSY` (or `SQLITE_LOCKED`): another connection holds the lock."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def turn_fits(record: TurnRecord, messages: list[Message], limit: int = LOOP_WRITE_MAX_CHARS) -> bool:
    """Whether the record and the messages are estimated at most `limit` characters of JSON."""
    left = limit - len(record.prompt) - len(record.final_text) - 1_024
    left -= _RECORD_ITEM_CHARS * (len(record.transitions) + len(record.approvals))
    if record.compaction is not None:
        left -= len(record.compaction.summary) + _RECORD_ITEM_CHARS
    if record.error is not None:
        left -= len(record.error.message)
    for message in messages:
        left = _message(message, left)
        if left < 0:
            return False
    for turn in record.assistant_turns:
        left = _calls(turn.tool_calls, left - len(turn.text) - len(turn.reasoning or "") - _RECORD_ITEM_CHARS)
        if left < 0:
            return False
    for tool_round in record.tool_rounds:
        left = _calls(tool_round.requested_tools, left)
        for result in tool_round.tool_results:
            left = _result(result, left)
        if left < 0:
            return False
    return left >= 0


def _message(message: Message, left: int) -> int:
    content = message.content
    left -= len(content) if isinstance(content, str) else _parts(content)
    if message.native is not None:
        left = _value(message.native.content, left)
    return _calls(message.tool_calls, left - _NODE_CHARS * 4)


def _parts(parts: list[ContentPart]) -> int:
    return sum(len(part.text) if isinstance(part, TextPart) else len(part.data) for part in parts) + 32 * len(parts)


def _result(result: ToolResult, left: int) -> int:
    left -= _parts(result.content) + _NODE_CHARS * 4
    return left if result.structured is None else _value(result.structured, left)


def _calls(calls: list[ToolCall], left: int) -> int:
    for call in calls:
        if left < 0:
            break
        left = _value(call.arguments, left - len(call.name) - len(call.id) - _NODE_CHARS * 2)
    return left
