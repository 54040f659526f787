"""MemoryStore: the session store in process memory, for tests and embedding.

It keeps the `SessionStore` contract exactly as `SqliteStore` does, minus durability: there is no
other process, so nothing is ever marked `interrupted`. Every method runs without awaiting, so each
one is atomic with respect to other tasks.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from agent_server.errors import CompactionConflict, InvalidArgument, SessionNotFound, StoreError, TurnNotFound
from agent_server.store import _common as common
from agent_server.store.base import MAX_PENDING_LISTED
from agent_server.types import (
    LOCAL_PRINCIPAL,
    UNTITLED,
    CompactionRecord,
    Message,
    PendingApproval,
    SessionHistory,
    SessionInfo,
    StoredMessage,
    TurnRecord,
    new_id,
    utc_now,
)


@dataclass
class _Compaction:
    record: CompactionRecord
    archive_through_seq: int
    head_seq: int


@dataclass
class _Session:
    ordinal: int
    session_id: str
    title: str
    metadata: dict[str, Any]
    created_at: str
    updated_at: str
    principal: str = LOCAL_PRINCIPAL
    summary: str | None = None
    messages: list[StoredMessage] = field(default_factory=list[StoredMessage])
    archived_through: int = 0
    """Messages with `seq <= archived_through` are archived (compaction archives a prefix)."""
    turns: dict[str, tuple[int, TurnRecord]] = field(default_factory=dict[str, tuple[int, TurnRecord]])
    """turn id -> (ordinal, record), in the order the turns began."""
    compactions: list[_Compaction] = field(default_factory=list[_Compaction])
    approved_tools: set[str] = field(default_factory=set[str])

    def head_seq(self) -> int:
        return self.messages[-1].seq if self.messages else 0

    def touch(self, *, title: str | None = None) -> None:
        """Updated now; and named `title` if it has no title yet (`UNTITLED`)."""
        self.updated_at = utc_now()
        if title is not None and self.title == UNTITLED:
            self.title = title


class MemoryStore:
    """The `SessionStore` in memory. Nothing survives the object."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}
        self._ordinals = itertools.count(1)
        self._closed = False
        self._questions: dict[str, tuple[PendingApproval, str | None]] = {}
        """question id -> (question, answer): the web view's pending approvals."""

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the session store is closed")

    def _session(self, session_id: str) -> _Session:
        self._check_open()
        try:
            return self._sessions[session_id]
        except KeyError:
            raise SessionNotFound(session_id) from None

    def _info(self, session: _Session) -> SessionInfo:
        return SessionInfo(
            session_id=session.session_id,
            title=session.title,
            metadata=dict(session.metadata),
            created_at=session.created_at,
            updated_at=session.updated_at,
            turn_count=len(session.turns),
        )

    def _add(self, *, title: str, metadata: dict[str, Any], principal: str) -> _Session:
        self._check_open()
        now = utc_now()
        session = _Session(next(self._ordinals), new_id("ses"), title, dict(metadata), now, now, principal)
        self._sessions[session.session_id] = session
        return session

    # --- sessions -----------------------------------------------------------------------

    async def create_session(
        self, *, title: str, metadata: dict[str, Any], principal: str = LOCAL_PRINCIPAL
    ) -> SessionInfo:
        return self._info(self._add(title=title, metadata=metadata, principal=principal))

    async def get_session(self, session_id: str) -> SessionInfo:
        return self._info(self._session(session_id))

    async def session_owner(self, session_id: str) -> str:
        return self._session(session_id).principal

    async def list_sessions(
        self, *, cursor: str | None, limit: int, principal: str = LOCAL_PRINCIPAL
    ) -> tuple[list[SessionInfo], str | None]:
        self._check_open()
        common.check_limit(limit)
        after = common.decode_cursor("sessions", cursor)
        newest_first = sorted(
            (s for s in self._sessions.values() if s.principal == principal), key=lambda s: s.ordinal, reverse=True
        )
        rest = [s for s in newest_first if after is None or s.ordinal < after]
        page = rest[:limit]
        next_cursor = common.encode_cursor("sessions", page[-1].ordinal) if len(rest) > limit else None
        return [self._info(s) for s in page], next_cursor

    async def delete_session(self, session_id: str) -> None:
        self._session(session_id)
        self._questions = {k: v for k, v in self._questions.items() if v[0].session_id != session_id}
        del self._sessions[session_id]

    # --- history ------------------------------------------------------------------------

    async def load_history(self, session_id: str) -> SessionHistory:
        return _history(self._session(session_id))

    async def all_messages(self, session_id: str) -> list[tuple[StoredMessage, bool]]:
        """Every stored message of the session, archived ones included, with its archived flag."""
        session = self._session(session_id)
        return [(m, m.seq <= session.archived_through) for m in session.messages]

    async def list_messages(
        self, session_id: str, *, cursor: str | None, limit: int
    ) -> tuple[list[tuple[StoredMessage, bool]], str | None]:
        """One page of every stored message (archived ones included, flagged), by seq; and the next cursor."""
        common.check_limit(limit)
        after = common.decode_cursor("messages", cursor) or 0
        session = self._session(session_id)
        rest = [m for m in session.messages if m.seq > after]
        page = [(m, m.seq <= session.archived_through) for m in rest[:limit]]
        return page, common.encode_cursor("messages", page[-1][0].seq) if len(rest) > limit else None

    # --- turns --------------------------------------------------------------------------

    async def begin_turn(self, record: TurnRecord, *, stored: bool = False) -> SessionHistory:
        session = self._session(record.session_id)
        history = _history(session)
        before = session.turns.get(record.turn_id)
        if before is not None and not (stored and before[1].status == "running"):
            raise StoreError(f"turn {record.turn_id!r} already exists in session {record.session_id!r}")
        session.turns.pop(record.turn_id, None)
        session.turns[record.turn_id] = (next(self._ordinals), record)  # last: its place is where it began
        session.touch(title=common.first_title(record))
        return history

    async def finish_turn(self, record: TurnRecord, messages: list[Message]) -> bool:
        """Write the final record and append `messages`; False (writing nothing) if the session is gone."""
        self._check_open()
        session = self._sessions.get(record.session_id)
        if session is None:
            return False
        ordinal = session.turns[record.turn_id][0] if record.turn_id in session.turns else next(self._ordinals)
        session.turns[record.turn_id] = (ordinal, record)
        head = session.head_seq()
        session.messages.extend(
            StoredMessage(seq=head + i, turn_id=record.turn_id, message=m) for i, m in enumerate(messages, start=1)
        )
        session.touch(title=common.first_title(record))
        return True

    async def get_turn(self, session_id: str, turn_id: str) -> TurnRecord:
        session = self._session(session_id)
        if turn_id not in session.turns:
            raise TurnNotFound(session_id, turn_id)
        return session.turns[turn_id][1]

    async def find_turn(self, turn_id: str, *, principal: str) -> TurnRecord | None:
        """The turn with this id in one of `principal`'s sessions (the first begun, when forks copied it), or None."""
        self._check_open()
        found = [
            session.turns[turn_id]
            for session in self._sessions.values()
            if session.principal == principal and turn_id in session.turns
        ]
        return min(found, key=lambda entry: entry[0])[1] if found else None

    async def list_turns(
        self, session_id: str, *, cursor: str | None, limit: int
    ) -> tuple[list[TurnRecord], str | None]:
        common.check_limit(limit)
        after = common.decode_cursor("turns", cursor) or 0
        rest = [entry for entry in self._session(session_id).turns.values() if entry[0] > after]
        page = rest[:limit]
        next_cursor = common.encode_cursor("turns", page[-1][0]) if len(rest) > limit else None
        return [record for _, record in page], next_cursor

    # --- compactions and forks ----------------------------------------------------------

    async def save_compaction(
        self, session_id: str, record: CompactionRecord, *, archive_through_seq: int, live_from_seq: int
    ) -> None:
        """Store the record; unless it is a dry run, archive `seq <= archive_through_seq` and set the summary.

        Raises:
            CompactionConflict: (not for a dry run) a message with `seq >= live_from_seq` is archived already.
        """
        session = self._session(session_id)
        if not record.dry_run and session.archived_through >= live_from_seq:
            raise CompactionConflict(session_id)
        session.compactions.append(_Compaction(record, archive_through_seq, session.head_seq()))
        if not record.dry_run:
            session.archived_through = max(session.archived_through, archive_through_seq)
            session.summary = record.summary
        session.touch()

    async def list_compactions(self, session_id: str) -> list[CompactionRecord]:
        return [c.record for c in self._session(session_id).compactions]

    async def remember_approval(self, session_id: str, tool: str) -> None:
        self._session(session_id).approved_tools.add(tool)

    async def approved_tools(self, session_id: str) -> frozenset[str]:
        return frozenset(self._session(session_id).approved_tools)

    async def fork_session(self, session_id: str, *, at_turn: str | None, title: str | None) -> SessionInfo:
        """A new session holding the finished turns up to `at_turn` (or all) and their history; see `base`."""
        old = self._session(session_id)
        last = self._fork_point(old, at_turn)
        turns = [record for ordinal, record in old.turns.values() if ordinal <= last and record.status != "running"]
        turn_ids = {record.turn_id for record in turns}
        cut = max((m.seq for m in old.messages if m.turn_id in turn_ids), default=0)
        messages = [m for m in old.messages if m.turn_id in turn_ids or (m.turn_id is None and m.seq <= cut)]
        # Compactions are kept only while everything they could have archived is in the fork.
        kept = {m.seq for m in messages}
        left_out = [m.seq for m in old.messages if m.seq <= cut and m.seq not in kept]
        clean = min(left_out, default=cut + 1) - 1
        new = self._add(title=common.fork_title(old.title, title), metadata=old.metadata, principal=old.principal)
        new.messages = messages
        new.compactions = [c for c in old.compactions if c.head_seq <= clean]
        for compaction in new.compactions:
            if not compaction.record.dry_run:
                new.summary, new.archived_through = compaction.record.summary, compaction.archive_through_seq
        for record in turns:
            new.turns[record.turn_id] = (next(self._ordinals), record.model_copy(update={"session_id": new.session_id}))
        return self._info(new)

    @staticmethod
    def _fork_point(session: _Session, at_turn: str | None) -> int:
        """The ordinal of the turn to fork after (all turns for None); InvalidArgument while it runs."""
        if at_turn is None:
            return 2**62
        if at_turn not in session.turns:
            raise TurnNotFound(session.session_id, at_turn)
        ordinal, record = session.turns[at_turn]
        if record.status == "running":
            raise InvalidArgument(common.fork_running_message(at_turn))
        return ordinal

    async def save_progress(self, record: TurnRecord) -> None:
        self._check_open()
        session = self._sessions.get(record.session_id)
        entry = session.turns.get(record.turn_id) if session is not None else None
        if session is not None and entry is not None and entry[1].status == "running":
            session.turns[record.turn_id] = (entry[0], record)

    async def post_question(self, question: PendingApproval) -> None:
        self._check_open()
        now = utc_now()
        self._questions = {k: v for k, v in self._questions.items() if v[0].expires_at > now}
        self._questions[question.question_id] = (question, None)

    async def pending_questions(self, principal: str) -> list[PendingApproval]:
        self._check_open()
        now = utc_now()
        pending = [q for q, answer in self._questions.values() if answer is None and q.expires_at > now]
        return [q for q in pending if q.principal == principal][:MAX_PENDING_LISTED]

    async def answer_question(self, question_id: str, choice: str, *, principal: str) -> bool:
        self._check_open()
        question, answer = self._questions.get(question_id, (None, None))
        if question is None or answer is not None or question.principal != principal:
            return False
        if question.expires_at <= utc_now():
            return False
        self._questions[question_id] = (question, choice)
        return True

    async def question_answer(self, question_id: str) -> str | None:
        self._check_open()
        return self._questions.get(question_id, (None, None))[1]

    async def drop_question(self, question_id: str) -> None:
        self._questions.pop(question_id, None)

    async def close(self) -> None:
        self._closed = True


def _history(session: _Session) -> SessionHistory:
    live = [m for m in session.messages if m.seq > session.archived_through]
    return SessionHistory(summary=session.summary, messages=live)
