"""The parsed live history of recently used sessions, so that a turn parses only the messages added since.

A turn begins by reading its session's live history; without this, a session of a few thousand messages
costs tens of milliseconds of JSON and pydantic work per turn, for messages that never change. Stored
messages are immutable and only two things change a session's live set: appends (at increasing `seq`) and
compactions, which archive a prefix (`seq <= n`) and set the summary. So a remembered history is still right
when the summary is the same and the live rows up to its last `seq` are as many as it holds, starting at its
first (a count also catches rows removed behind the store's back: a restored backup, a hand edit); the store
then reads only the live rows after it. An empty history is not remembered: it costs nothing to read. Another
process's appends and compactions are caught the same way, inside the store's own read (SQLite: one
transaction; PostgreSQL: one statement after the session's row is locked), so a remembered history is never
trusted without that check.

Bounded: at most `SESSIONS_KEPT` sessions and `CHARS_KEPT` characters of stored JSON in all (a history larger
than that is not kept at all); the least recently used go first. Not thread-safe: each store calls it while
it holds its own connection (SQLite's `_lock`; PostgreSQL runs on one event loop, and checks that the
remembered history it read after is still the one it started from: `Resume.after`).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_server.types import SessionHistory, StoredMessage

SESSIONS_KEPT = 64
CHARS_KEPT = 8 * 1024 * 1024
"""About 2 M tokens of history in all, a few sessions at a large model's context window."""


@dataclass(frozen=True)
class _Kept:
    summary: str | None
    messages: tuple[StoredMessage, ...]
    last_seq: int
    """The last live `seq` seen (0: none), after which the next read starts."""
    chars: int


@dataclass(frozen=True)
class Resume:
    after: int
    """Read the live rows with a greater `seq`."""
    older: _Kept | None = None


FROM_START = Resume(after=0)
"""Read every live row: nothing remembered holds."""


class HistoryCache:
    def __init__(self, *, sessions: int = SESSIONS_KEPT, chars: int = CHARS_KEPT) -> None:
        self._sessions_kept, self._chars_kept = sessions, chars
        self._kept: dict[str, _Kept] = {}  # insertion order: the least recently used first
        self._chars = 0

    def remembered_through(self, session_id: str) -> int:
        """The last `seq` of the session's remembered history (0: none), for the store's `live_prefix`."""
        kept = self._kept.get(session_id)
        return kept.last_seq if kept is not None else 0

    def resume(self, session_id: str, *, summary: str | None, live_prefix: tuple[int | None, int]) -> Resume:
        """Where the read of the live rows starts, given the store's summary now and `live_prefix`: the first
        live `seq` and the number of live rows up to `remembered_through`. After the remembered history when
        it still holds, else from the start."""
        kept = self._kept.get(session_id)
        if kept is None or kept.summary != summary:
            return FROM_START
        if live_prefix != (kept.messages[0].seq, len(kept.messages)):
            return FROM_START
        return Resume(after=kept.last_seq, older=kept)

    def history(
        self, session_id: str, summary: str | None, resume: Resume, rows: list[tuple[StoredMessage, int]]
    ) -> SessionHistory:
        """The live history: what `resume` holds and `rows`, the live messages read after it, each with the
        length of its stored JSON; remembered for the next turn."""
        older = resume.older
        messages = (older.messages if older else ()) + tuple(message for message, _ in rows)
        chars = (older.chars if older else len(summary or "")) + sum(size for _, size in rows)
        self._drop(session_id)
        if messages and chars <= self._chars_kept:
            last = messages[-1].seq
            self._keep(session_id, _Kept(summary=summary, messages=messages, last_seq=last, chars=chars))
        return SessionHistory.model_construct(summary=summary, messages=list(messages))

    def __contains__(self, session_id: str) -> bool:
        return session_id in self._kept

    def forget(self, session_id: str) -> None:
        self._drop(session_id)

    def _drop(self, session_id: str) -> _Kept | None:
        kept = self._kept.pop(session_id, None)
        if kept is not None:
            self._chars -= kept.chars
        return kept

    def _keep(self, session_id: str, kept: _Kept) -> None:
        self._drop(session_id)
        self._kept[session_id] = kept
        self._chars += kept.chars
        while self._chars > self._chars_kept or len(self._kept) > self._sessions_kept:
            self._drop(next(iter(self._kept)))
