"""The session store boundary: sessions, history, turn records, compactions.

Contract (`SqliteStore`, `MemoryStore` and `PostgresStore` keep it; `tests/unit/store/` checks it):

- Sessions list newest-created first; turns and messages list oldest first. Cursors are opaque strings.
- `begin_turn` makes a turn visible as `running` and returns the history it starts from (one call:
  a turn's start costs one store round trip). `finish_turn` writes the final record and the
  turn's history messages in one transaction, so a turn is never half written.
- A session's turns are listed in the order they *began* (took the session's turn lock), which is the
  order their messages follow in the history (turns of a session never overlap, so each writes its messages
  before the next begins): a turn stored `running` before it began (a background turn stored as it was
  started, then queued: `finish_turn` with no messages) is moved last by its `begin_turn(stored=True)`.
- `finish_turn` for a session deleted meanwhile writes nothing and returns False.
- History messages are ordered by `seq`, increasing within a session. Compaction archives the
  messages with `seq <= archive_through_seq` (they stay stored, marked archived) and sets the
  session's summary; `load_history` returns the summary and the live messages only.
- Compaction is atomic against the store's current state: `save_compaction` is told the first
  message its summary folds (`live_from_seq`) and refuses with `CompactionConflict`, storing
  nothing, when a message from there on was archived meanwhile (another process compacted the
  session after this one loaded its history), since the new summary would not cover them.
- A fork copies, into a new session, the finished turns up to `at_turn` in turn order, or
  all finished turns, and the history messages *of those turns* (membership, not position: in a store
  written before a session's turns queued across processes, a later turn may have finished, and written its
  messages, first). A turn
  still running is not copied (forking at one is an `InvalidArgument`), so the fork never holds
  a `running` turn that nothing will finish. The summary and archive marks in force are kept
  while every message they could cover is in the fork, i.e. up to the first message left out.
- Every method raises `SessionNotFound` for an unknown session id, except `finish_turn`. Ids reach a store
  well-formed (`agent_server.ids`, checked where they enter, in the runtime); every such id, the longest
  included, is stored or not found, never a `StoreError`.
- `remember_approval` keeps an `allow_session` answer for (session, agent-side tool name) until the
  session is deleted; `approved_tools` lists the session's. A fork does not inherit them (approval was
  given for the conversation it was given in).
- Principals: a session belongs to the principal that made it (`create_session(principal=...)`, default `local`;
  a fork belongs to its source's). `list_sessions` lists one principal's sessions, `session_owner` says whose a
  session is, and `find_turn` finds a turn by its id alone among one principal's sessions (a fork copies its
  source's finished turns with their ids: the first begun is returned). The other methods take ids their
  caller has checked: the runtime checks ownership before it reaches the store (`agent_server.runtime.owners`).
  A store of before principals is migrated, its sessions belonging to `local`.
- `save_progress` writes a running turn's record as it is so far (status `running`), only while the stored
  turn is still `running` (never over its final record); it touches nothing else (not the session's
  `updated_at`), so a page of the web view shows a turn of another process or replica as it goes.
- Pending approvals of the web view (`PendingApproval`, settings `approvals.web`): `post_question` keeps one
  until it is dropped or its `expires_at` passes (expired ones are removed by later posts); `pending_questions`
  lists a principal's unanswered, unexpired ones, oldest first; `answer_question` records the first answer of
  the question's own principal while it is pending and unexpired (True), and refuses any other (False);
  `question_answer` is that answer; deleting a session drops its questions.
- Titles: a session created with the title `UNTITLED` takes the first title a turn of it gives (`_common.first_title`:
  its prompt's start) when `begin_turn` or `finish_turn` writes that turn; any other title stays as it is.
- Which session is a connection's current one is not stored: it is per connection, in memory
  (DESIGN 3.5), so `SessionInfo.active` is always False here and set by the front door.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from agent_server.types import (
    LOCAL_PRINCIPAL,
    CompactionRecord,
    Message,
    PendingApproval,
    SessionHistory,
    SessionInfo,
    StoredMessage,
    TurnRecord,
)


class SessionStore(Protocol):
    async def create_session(
        self, *, title: str, metadata: dict[str, Any], principal: str = LOCAL_PRINCIPAL
    ) -> SessionInfo: ...

    async def get_session(self, session_id: str) -> SessionInfo: ...

    async def session_owner(self, session_id: str) -> str:
        """The principal the session belongs to."""
        ...

    async def list_sessions(
        self, *, cursor: str | None, limit: int, principal: str = LOCAL_PRINCIPAL
    ) -> tuple[list[SessionInfo], str | None]:
        """One page of `principal`'s sessions, newest first; and the next cursor."""
        ...

    async def delete_session(self, session_id: str) -> None: ...

    async def load_history(self, session_id: str) -> SessionHistory: ...

    async def all_messages(self, session_id: str) -> list[tuple[StoredMessage, bool]]:
        """Every stored message of the session, archived ones included, with its archived flag."""
        ...

    async def list_messages(
        self, session_id: str, *, cursor: str | None, limit: int
    ) -> tuple[list[tuple[StoredMessage, bool]], str | None]:
        """One page of every stored message (archived ones included, flagged), by seq; and the next cursor."""
        ...

    async def begin_turn(self, record: TurnRecord, *, stored: bool = False) -> SessionHistory:
        """Make the turn visible as `running`, last among the session's turns; returns the session's history as
        the turn starts from it. `stored`: this store stored the turn's `running` record when it was started
        (before it queued); that record moves last. Otherwise a turn with this id is a `StoreError`."""
        ...

    async def finish_turn(self, record: TurnRecord, messages: list[Message]) -> bool: ...

    async def get_turn(self, session_id: str, turn_id: str) -> TurnRecord: ...

    async def find_turn(self, turn_id: str, *, principal: str) -> TurnRecord | None:
        """The turn with this id in one of `principal`'s sessions, or None (see the module docstring)."""
        ...

    async def list_turns(
        self, session_id: str, *, cursor: str | None, limit: int
    ) -> tuple[list[TurnRecord], str | None]: ...

    async def save_compaction(
        self, session_id: str, record: CompactionRecord, *, archive_through_seq: int, live_from_seq: int
    ) -> None: ...

    async def list_compactions(self, session_id: str) -> list[CompactionRecord]: ...

    async def fork_session(self, session_id: str, *, at_turn: str | None, title: str | None) -> SessionInfo: ...

    async def remember_approval(self, session_id: str, tool: str) -> None:
        """Remember that the user allowed `tool` for the rest of this session (`allow_session`)."""
        ...

    async def approved_tools(self, session_id: str) -> frozenset[str]:
        """The tools the user allowed for this session."""
        ...

    async def save_progress(self, record: TurnRecord) -> None:
        """Write the running turn's record as it is so far, unless the stored turn has ended."""
        ...

    async def post_question(self, question: PendingApproval) -> None:
        """Keep a question of the web view for every page (see the module docstring)."""
        ...

    async def pending_questions(self, principal: str) -> list[PendingApproval]:
        """`principal`'s unanswered, unexpired questions, oldest first (at most `MAX_PENDING_LISTED`)."""
        ...

    async def answer_question(self, question_id: str, choice: str, *, principal: str) -> bool:
        """Record the answer when the question is `principal`'s, pending and unexpired; whether it was."""
        ...

    async def question_answer(self, question_id: str) -> str | None:
        """The question's answer, or None (unanswered, or gone)."""
        ...

    async def drop_question(self, question_id: str) -> None: ...

    async def close(self) -> None: ...


MAX_PENDING_LISTED = 200
"""The most pending questions `pending_questions` lists at once."""


@dataclass(frozen=True)
class SharedTask:
    """An MCP task that any process sharing the store may be asked about: the turn it runs, and whose it is."""

    task_id: str
    turn_id: str
    session_id: str
    detail: str
    created_at: str
    principal: str = LOCAL_PRINCIPAL


@runtime_checkable
class TurnLocks(Protocol):
    """A store whose sessions' turn locks every process on it shares (`SqliteStore` on its state dir,
    `PostgresStore`): a session's turns never overlap, whichever processes run them."""

    def hold_turn(
        self, session_id: str, *, deadline: float = math.inf, on_busy: Callable[[], None] | None = None
    ) -> AbstractAsyncContextManager[bool]:
        """Hold the session's turn lock, shared by every process, for the block; yields False (not holding
        it) when `deadline` (anyio's clock) passed while waiting. `on_busy` is told when the lock is held
        elsewhere, before the wait."""
        ...


@runtime_checkable
class SharedStore(TurnLocks, Protocol):
    """What a store that several server replicas share adds (`PostgresStore`); the runtime uses it when
    its store has it."""

    async def request_cancel(self, turn_id: str) -> None:
        """Ask every process sharing the store to cancel the turn if it runs it (see `serve_notifications`)."""
        ...

    async def wait_ended(self, session_id: str, turn_id: str, timeout_s: float) -> TurnRecord:
        """The turn's record once it is no longer `running`, or its running record after `timeout_s`."""
        ...

    async def serve_notifications(self, on_cancel: Callable[[str], None]) -> None:
        """Until cancelled: call `on_cancel(turn_id)` for each cancel request any process makes."""
        ...

    async def share_task(self, task: SharedTask) -> None:
        """Keep the task for every process (until its session is deleted)."""
        ...

    async def shared_task(self, task_id: str) -> SharedTask | None:
        """The task with this id, whichever process created it, or None."""
        ...
