"""SqliteStore: the session store on stdlib sqlite3, in WAL mode at `<state dir>/state.db`.

Several server processes may share one state dir: writes run in `BEGIN IMMEDIATE` transactions and
a busy database is waited for (`busy_timeout`), not failed on. Sqlite calls run in a worker thread
through `anyio.to_thread.run_sync`, on one connection per store guarded by a lock, except a turn's small
start and end (and a session's creation): those run on the event loop when the database is free at once
and their payload is small, and fall back to the thread otherwise (`_loop_writes`).

Turns left `running` by a process that died are marked `interrupted` by the next `open` (see
`_owners` for how a dead process is told from a live one). A session's turns never overlap across the
processes either: `hold_turn` is the session's turn lock, shared through the state dir (`_turn_locks`).
"""

from __future__ import annotations

import errno
import json
import logging
import math
import sqlite3
import threading
from collections.abc import AsyncGenerator, Callable, Generator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread
from pydantic import ValidationError

from agent_server.errors import CompactionConflict, InvalidArgument, SessionNotFound, StoreError, TurnNotFound
from agent_server.store import _common as common
from agent_server.store._history_cache import HistoryCache
from agent_server.store._loop_writes import (
    LOOP_WRITE_MAX_CHARS,
    HistoryTooLarge,
    LargeHistories,
    is_busy,
    turn_fits,
)
from agent_server.store._owners import OwnerLock
from agent_server.store._sqlite_db import (
    BUSY_FAIL,
    BUSY_WAIT,
    SESSION_COLUMNS,
    archived_since,
    checkpoint,
    connect,
    dump,
    get_session,
    head_seq,
    interrupt_dead_owners,
    live_messages,
    live_prefix,
    migrate,
    require_session,
    session_info,
    session_owner,
    stored_messages,
    touch,
    transaction,
    turn_ordinal,
)
from agent_server.store._turn_locks import TurnLockFiles
from agent_server.store.base import MAX_PENDING_LISTED
from agent_server.types import (
    LOCAL_PRINCIPAL,
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

logger = logging.getLogger(__name__)

T = TypeVar("T")

CHECKPOINT_EVERY_WRITES = 256
"""Write transactions between two checkpoints (a turn writes a few WAL pages, so about SQLite's own default of
1,000 pages). A checkpoint runs in a worker thread on a connection of its own, one at a time: a PASSIVE one takes
no lock a writer needs, so the store's writes, on the loop too, go on meanwhile. (On the store's connection, under
its lock, it sent every write of a burst of turns to a worker thread for as long as it ran: 15-20% of the CPU of
a turn in a burst, `bench/README.md` "Part 8".)"""
WAL_CATCH_UP_FRAMES = 4_096
"""WAL frames (pages, 4 KiB each) from which a checkpoint is run a second time holding the store's lock. The next
write starts the WAL over only when a checkpoint copied every frame, and writes made while a checkpoint runs on
its own connection are not copied: in a burst that never pauses, the WAL would grow without bound (a burst of 200
turns at a time took it to 9,500 frames, 39 MB, before a pause let it start over; the HTTP burst past 70 MB).
The second run copies only what was written meanwhile; this process's writes wait for it, those on the loop
without leaving it (a hop to a worker thread each cost more, `bench/README.md` "Part 8")."""


class _Deferred(Exception):
    """The write cannot run on the event loop now (busy database, large payload): run it in a worker thread."""


class SqliteStore:
    """The `SessionStore` on SQLite. Construct with `await SqliteStore.open(state_dir)`."""

    def __init__(self, conn: sqlite3.Connection, path: Path, owner: OwnerLock, turn_locks: TurnLockFiles) -> None:
        self._conn: sqlite3.Connection | None = conn
        self._path = path
        self._waits_when_busy = True  # `connect` set BUSY_WAIT
        self._owner = owner
        self._turn_locks = turn_locks
        self._lock = threading.Lock()
        self._writes = 0
        """Write transactions since the last checkpoint (reset on the loop without `_lock`: a write a thread counts
        meanwhile may be lost, and the next checkpoint comes one write later)."""
        self._checkpointing = False
        """A checkpoint is under way (set and read on the event loop): the writes that find one due meanwhile
        start no other."""
        self._catching_up: anyio.Event | None = None
        """Set while a checkpoint holds `_lock` (`WAL_CATCH_UP_FRAMES`): writes on the loop wait for its end."""
        self._checkpoint_lock = threading.Lock()
        self._checkpoint_conn: sqlite3.Connection | None = None
        """The checkpoints' own connection (opened by the first; used and closed holding `_checkpoint_lock`)."""
        self._large_histories = LargeHistories()
        self._histories = HistoryCache()
        """The parsed live histories of recently begun sessions (used holding `_lock`)."""

    @classmethod
    async def open(cls, state_dir: Path) -> SqliteStore:
        """Open (creating if needed) `<state_dir>/state.db`; mark dead processes' running turns interrupted."""
        return await anyio.to_thread.run_sync(cls._open_sync, state_dir)

    @classmethod
    def _open_sync(cls, state_dir: Path) -> SqliteStore:
        try:
            state_dir.mkdir(parents=True, exist_ok=True)
            turn_locks = TurnLockFiles(state_dir / "turn_locks")
            owner = OwnerLock(state_dir / "owners")
        except OSError as exc:
            raise _open_failure(state_dir, exc) from exc
        try:
            conn = connect(state_dir / "state.db")
            try:
                migrate(conn)
                interrupt_dead_owners(conn, owner.path.parent, owner.instance_id)
            except BaseException:
                conn.close()
                raise
        except (sqlite3.Error, OSError) as exc:
            owner.release()
            raise _open_failure(state_dir, exc) from exc
        except BaseException:
            owner.release()
            raise
        logger.debug("opened the session store in %s as instance %s", state_dir, owner.instance_id)
        return cls(conn, state_dir / "state.db", owner, turn_locks)

    @property
    def instance_id(self) -> str:
        """The id this store tags the turns it begins with."""
        return self._owner.instance_id

    def _locked(self, fn: Callable[[sqlite3.Connection], T], write: bool) -> T:
        with self._lock:
            conn = self._open_conn()
            with _store_errors():
                self._busy_waits(conn, True)
                with transaction(conn, write=write):
                    result = fn(conn)
                if write:
                    self._writes += 1
                return result

    def _busy_waits(self, conn: sqlite3.Connection, wait: bool) -> None:
        """Whether the next transaction waits for a busy database (a worker thread's) or fails at once (the event
        loop's); the pragma runs only when that changes, since a turn's writes on the loop come in a row (two
        statements fewer per write). Called holding `_lock`."""
        if self._waits_when_busy != wait:
            conn.execute(BUSY_WAIT if wait else BUSY_FAIL)
            self._waits_when_busy = wait

    def _open_conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("the session store is closed")
        return self._conn

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await anyio.to_thread.run_sync(self._locked, fn, False)

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        result = await anyio.to_thread.run_sync(self._locked, fn, True)
        await self._checkpoint_if_due()
        return result

    async def _small_write(self, fn: Callable[[sqlite3.Connection, bool], T], *, fits: bool) -> T:
        """`fn` in one write transaction: on the event loop when `fits` (the payload is small) and the database
        is free at once, else in a worker thread. `fn`'s second argument says it runs on the loop (then it
        raises `HistoryTooLarge` rather than read much); the thread runs it again from the start."""
        if fits:
            while (catching_up := self._catching_up) is not None:  # cheaper than a hop to a thread that waits
                await catching_up.wait()
            try:
                result = self._on_loop(fn)
            except _Deferred:
                pass
            else:
                await self._checkpoint_if_due()
                return result
        return await self._write(lambda conn: fn(conn, False))

    def _on_loop(self, fn: Callable[[sqlite3.Connection, bool], T]) -> T:
        if not self._lock.acquire(blocking=False):  # this store's worker thread is in a transaction
            raise _Deferred
        try:
            conn = self._open_conn()
            try:
                with _store_errors(on_loop=True):
                    self._busy_waits(conn, False)
                    with transaction(conn, write=True):
                        result = fn(conn, True)
            except (HistoryTooLarge, _Busy) as exc:
                if conn.in_transaction:  # SQLITE_BUSY at COMMIT leaves it open
                    conn.execute("ROLLBACK")
                raise _Deferred from exc
            self._writes += 1
            return result
        finally:
            self._lock.release()

    async def _checkpoint_if_due(self) -> None:
        """Checkpoint (see `CHECKPOINT_EVERY_WRITES`) when one is due and none runs; the write that finds it due
        waits for it, the others go on (but for a catch-up, `WAL_CATCH_UP_FRAMES`, which they wait for)."""
        if self._writes < CHECKPOINT_EVERY_WRITES or self._checkpointing:
            return
        self._checkpointing = True
        try:
            self._writes = 0
            frames = await anyio.to_thread.run_sync(self._checkpoint, False)
            if frames >= WAL_CATCH_UP_FRAMES:
                self._catching_up = catching_up = anyio.Event()
                try:
                    await anyio.to_thread.run_sync(self._checkpoint, True)
                finally:
                    self._catching_up = None
                    catching_up.set()
        finally:
            self._checkpointing = False

    def _checkpoint(self, hold_writes: bool) -> int:
        """One PASSIVE checkpoint on the checkpoints' own connection (holding `_lock` with `hold_writes`: nothing is
        written meanwhile, so the WAL starts over at the next write); the frames it found in the WAL. A failed
        checkpoint fails no write (each was committed already): it is logged, and the next one is due
        `CHECKPOINT_EVERY_WRITES` writes later."""
        with self._checkpoint_lock:
            if self._conn is None:  # closed
                return 0
            try:
                if self._checkpoint_conn is None:
                    self._checkpoint_conn = connect(self._path)
                if not hold_writes:
                    return checkpoint(self._checkpoint_conn)
                with self._lock:
                    return checkpoint(self._checkpoint_conn)
            except sqlite3.Error as exc:  # another process checkpointing now is no news; anything else is
                logger.log(
                    logging.DEBUG if is_busy(exc) else logging.WARNING,
                    "could not checkpoint the session store: %s",
                    exc,
                )
                return 0

    # --- sessions -----------------------------------------------------------------------

    async def create_session(
        self, *, title: str, metadata: dict[str, Any], principal: str = LOCAL_PRINCIPAL
    ) -> SessionInfo:
        session_id, now, meta = new_id("ses"), utc_now(), json.dumps(metadata, ensure_ascii=False)

        def run(conn: sqlite3.Connection, _on_loop: bool) -> SessionInfo:
            conn.execute(
                "INSERT INTO sessions (session_id, title, metadata, created_at, updated_at, principal)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, title, meta, now, now, principal),
            )
            return get_session(conn, session_id)

        return await self._small_write(run, fits=len(meta) + len(title) <= LOOP_WRITE_MAX_CHARS)

    async def get_session(self, session_id: str) -> SessionInfo:
        return await self._read(lambda conn: get_session(conn, session_id))

    async def session_owner(self, session_id: str) -> str:
        return await self._read(lambda conn: session_owner(conn, session_id))

    async def list_sessions(
        self, *, cursor: str | None, limit: int, principal: str = LOCAL_PRINCIPAL
    ) -> tuple[list[SessionInfo], str | None]:
        common.check_limit(limit)
        after = common.decode_cursor("sessions", cursor)

        def run(conn: sqlite3.Connection) -> tuple[list[SessionInfo], str | None]:
            rows = conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.principal = ? AND s.ordinal < ?"
                " ORDER BY s.ordinal DESC LIMIT ?",
                (principal, after if after is not None else 2**62, limit + 1),
            ).fetchall()
            more = len(rows) > limit
            rows = rows[:limit]
            return [session_info(row) for row in rows], common.encode_cursor("sessions", rows[-1][0]) if more else None

        return await self._read(run)

    async def delete_session(self, session_id: str) -> None:
        def run(conn: sqlite3.Connection) -> None:
            require_session(conn, session_id)
            for table in ("messages", "turns", "compactions", "approvals", "questions", "sessions"):
                conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
            self._histories.forget(session_id)

        await self._write(run)
        try:
            self._turn_locks.remove(session_id)
        except OSError as exc:  # an empty file left behind; nothing else depends on it
            logger.warning("could not remove the turn lock file of session %s: %s", session_id, exc)

    # --- history ------------------------------------------------------------------------

    async def load_history(self, session_id: str) -> SessionHistory:
        return await self._read(lambda conn: _history(conn, session_id, self._histories))

    async def all_messages(self, session_id: str) -> list[tuple[StoredMessage, bool]]:
        """Every stored message of the session, archived ones included, with its archived flag."""

        def run(conn: sqlite3.Connection) -> list[tuple[StoredMessage, bool]]:
            require_session(conn, session_id)
            return stored_messages(conn, session_id)

        return await self._read(run)

    async def list_messages(
        self, session_id: str, *, cursor: str | None, limit: int
    ) -> tuple[list[tuple[StoredMessage, bool]], str | None]:
        """One page of every stored message (archived ones included, flagged), by seq; and the next cursor."""
        common.check_limit(limit)
        after = common.decode_cursor("messages", cursor) or 0

        def run(conn: sqlite3.Connection) -> tuple[list[tuple[StoredMessage, bool]], str | None]:
            require_session(conn, session_id)
            page = stored_messages(conn, session_id, after=after, limit=limit + 1)
            more = len(page) > limit
            page = page[:limit]
            return page, common.encode_cursor("messages", page[-1][0].seq) if more else None

        return await self._read(run)

    # --- turns --------------------------------------------------------------------------

    async def begin_turn(self, record: TurnRecord, *, stored: bool = False) -> SessionHistory:
        """Make the turn visible (normally as `running`), owned by this store instance, last among the session's
        turns (with `stored`, its `running` record stored before it began moves there: see `base`); the history
        as the turn starts from it (one transaction, one worker-thread hop)."""
        owner = self.instance_id

        def run(conn: sqlite3.Connection, on_loop: bool) -> SessionHistory:
            budget = LOOP_WRITE_MAX_CHARS - len(record.prompt) if on_loop else None
            try:
                history = _history(conn, record.session_id, self._histories, max_chars=budget)
            except HistoryTooLarge:
                self._large_histories.remember(record.session_id)  # called holding `_lock`
                raise
            if stored:
                conn.execute(
                    "DELETE FROM turns WHERE session_id = ? AND turn_id = ? AND status = 'running' AND owner = ?",
                    (record.session_id, record.turn_id, owner),
                )
            conn.execute(
                "INSERT INTO turns (session_id, turn_id, status, record, owner) VALUES (?, ?, ?, ?, ?)",
                (record.session_id, record.turn_id, record.status, dump(record), owner),
            )
            touch(conn, record.session_id, title=common.first_title(record))
            return history

        # A large history the cache holds is not read again: only what was added since counts.
        large = record.session_id in self._large_histories and record.session_id not in self._histories
        fits = not large and turn_fits(record, [])
        return await self._small_write(run, fits=fits)

    async def finish_turn(self, record: TurnRecord, messages: list[Message]) -> bool:
        """Write the final record and append `messages` in one transaction; False if the session is gone."""
        owner = self.instance_id

        def run(conn: sqlite3.Connection, _on_loop: bool) -> bool:
            session_id = record.session_id
            if not touch(conn, session_id, title=common.first_title(record)):
                return False
            conn.execute(
                "INSERT INTO turns (session_id, turn_id, status, record, owner) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (session_id, turn_id) DO UPDATE SET status = excluded.status, record = excluded.record",
                (session_id, record.turn_id, record.status, dump(record), owner),
            )
            head = head_seq(conn, session_id)
            conn.executemany(
                "INSERT INTO messages (session_id, seq, turn_id, message) VALUES (?, ?, ?, ?)",
                [(session_id, head + i, record.turn_id, dump(m)) for i, m in enumerate(messages, start=1)],
            )
            return True

        return await self._small_write(run, fits=turn_fits(record, messages))

    async def get_turn(self, session_id: str, turn_id: str) -> TurnRecord:
        def run(conn: sqlite3.Connection) -> TurnRecord:
            require_session(conn, session_id)
            row = conn.execute(
                "SELECT record FROM turns WHERE session_id = ? AND turn_id = ?", (session_id, turn_id)
            ).fetchone()
            if row is None:
                raise TurnNotFound(session_id, turn_id)
            return TurnRecord.model_validate(json.loads(row[0]))

        return await self._read(run)

    async def find_turn(self, turn_id: str, *, principal: str) -> TurnRecord | None:
        """The turn with this id in one of `principal`'s sessions (the first begun, when forks copied it), or None."""

        def run(conn: sqlite3.Connection) -> TurnRecord | None:
            row = conn.execute(
                "SELECT t.record FROM turns t JOIN sessions s ON s.session_id = t.session_id"
                " WHERE t.turn_id = ? AND s.principal = ? ORDER BY t.ordinal LIMIT 1",
                (turn_id, principal),
            ).fetchone()
            return None if row is None else TurnRecord.model_validate(json.loads(row[0]))

        return await self._read(run)

    async def list_turns(
        self, session_id: str, *, cursor: str | None, limit: int
    ) -> tuple[list[TurnRecord], str | None]:
        common.check_limit(limit)
        after = common.decode_cursor("turns", cursor)

        def run(conn: sqlite3.Connection) -> tuple[list[TurnRecord], str | None]:
            require_session(conn, session_id)
            rows = conn.execute(
                "SELECT ordinal, record FROM turns WHERE session_id = ? AND ordinal > ? ORDER BY ordinal LIMIT ?",
                (session_id, after or 0, limit + 1),
            ).fetchall()
            more = len(rows) > limit
            rows = rows[:limit]
            turns = [TurnRecord.model_validate(json.loads(record)) for _, record in rows]
            return turns, common.encode_cursor("turns", rows[-1][0]) if more else None

        return await self._read(run)

    @asynccontextmanager
    async def hold_turn(
        self, session_id: str, *, deadline: float = math.inf, on_busy: Callable[[], None] | None = None
    ) -> AsyncGenerator[bool]:
        """Hold the session's turn lock, shared by every process on the state dir, for the block; yields False
        (not holding it) when `deadline` (anyio's clock) passed while waiting; `on_busy` is told when another
        process holds it.

        Raises:
            StoreError: the lock file cannot be opened.
        """
        fd: int | None = None
        try:
            with anyio.CancelScope(deadline=deadline):
                fd = await self._turn_locks.acquire(session_id, on_busy)
        except OSError as exc:
            raise StoreError(f"session store: cannot take the turn lock of session {session_id!r}: {exc}") from exc
        if fd is None:
            yield False
            return
        try:
            yield True
        finally:
            self._turn_locks.release(fd)

    # --- compactions and forks ----------------------------------------------------------

    async def save_compaction(
        self, session_id: str, record: CompactionRecord, *, archive_through_seq: int, live_from_seq: int
    ) -> None:
        """Store the record; unless it is a dry run, archive `seq <= archive_through_seq` and set the summary.

        The check and the write are one `BEGIN IMMEDIATE` transaction, so two processes compacting
        one session cannot both succeed from the same history.

        Raises:
            CompactionConflict: (not for a dry run) a message with `seq >= live_from_seq` is archived already.
        """

        def run(conn: sqlite3.Connection) -> None:
            require_session(conn, session_id)
            if not record.dry_run and archived_since(conn, session_id, live_from_seq):
                raise CompactionConflict(session_id)
            conn.execute(
                "INSERT INTO compactions (session_id, record, archive_through_seq, head_seq) VALUES (?, ?, ?, ?)",
                (session_id, dump(record), archive_through_seq, head_seq(conn, session_id)),
            )
            if not record.dry_run:
                conn.execute(
                    "UPDATE messages SET archived = 1 WHERE session_id = ? AND seq <= ?",
                    (session_id, archive_through_seq),
                )
                conn.execute("UPDATE sessions SET summary = ? WHERE session_id = ?", (record.summary, session_id))
            touch(conn, session_id)

        await self._write(run)

    async def list_compactions(self, session_id: str) -> list[CompactionRecord]:
        def run(conn: sqlite3.Connection) -> list[CompactionRecord]:
            require_session(conn, session_id)
            rows = conn.execute("SELECT record FROM compactions WHERE session_id = ? ORDER BY ordinal", (session_id,))
            return [CompactionRecord.model_validate(json.loads(row[0])) for row in rows]

        return await self._read(run)

    async def remember_approval(self, session_id: str, tool: str) -> None:
        def run(conn: sqlite3.Connection) -> None:
            require_session(conn, session_id)
            conn.execute(
                "INSERT OR IGNORE INTO approvals (session_id, tool, created_at) VALUES (?, ?, ?)",
                (session_id, tool, utc_now()),
            )

        await self._write(run)

    async def approved_tools(self, session_id: str) -> frozenset[str]:
        def run(conn: sqlite3.Connection) -> frozenset[str]:
            require_session(conn, session_id)
            rows = conn.execute("SELECT tool FROM approvals WHERE session_id = ?", (session_id,))
            return frozenset(row[0] for row in rows)

        return await self._read(run)

    async def fork_session(self, session_id: str, *, at_turn: str | None, title: str | None) -> SessionInfo:
        """A new session holding the finished turns up to `at_turn` (or all) and their history; see `base`."""
        new_session = new_id("ses")
        return await self._write(lambda conn: _fork(conn, session_id, new_session, at_turn, title))

    # --- the web view: running turns' progress, pending approvals ----------------------------

    async def save_progress(self, record: TurnRecord) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE turns SET record = ? WHERE session_id = ? AND turn_id = ? AND status = 'running'",
                (dump(record), record.session_id, record.turn_id),
            )

        await self._write(run)

    async def post_question(self, question: PendingApproval) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM questions WHERE expires_at <= ?", (utc_now(),))
            conn.execute(
                "INSERT INTO questions (question_id, session_id, principal, expires_at, question)"
                " VALUES (?, ?, ?, ?, ?)",
                (question.question_id, question.session_id, question.principal, question.expires_at, dump(question)),
            )

        await self._write(run)

    async def pending_questions(self, principal: str) -> list[PendingApproval]:
        def run(conn: sqlite3.Connection) -> list[PendingApproval]:
            rows = conn.execute(
                "SELECT question FROM questions WHERE principal = ? AND answer IS NULL AND expires_at > ?"
                " ORDER BY expires_at LIMIT ?",
                (principal, utc_now(), MAX_PENDING_LISTED),
            )
            return [PendingApproval.model_validate(json.loads(row[0])) for row in rows]

        return await self._read(run)

    async def answer_question(self, question_id: str, choice: str, *, principal: str) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "UPDATE questions SET answer = ? WHERE question_id = ? AND principal = ? AND answer IS NULL"
                " AND expires_at > ?",
                (choice, question_id, principal, utc_now()),
            )
            return cursor.rowcount == 1

        return await self._write(run)

    async def question_answer(self, question_id: str) -> str | None:
        def run(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT answer FROM questions WHERE question_id = ?", (question_id,)).fetchone()
            return None if row is None else row[0]

        return await self._read(run)

    async def drop_question(self, question_id: str) -> None:
        await self._write(lambda conn: conn.execute("DELETE FROM questions WHERE question_id = ?", (question_id,)))

    async def close(self) -> None:
        """Close the database and release this instance's liveness lock. Idempotent."""

        def run() -> None:
            # Both locks (neither holder takes the other's): after a running checkpoint, and `_conn = None` tells
            # a later one the store is closed.
            with self._checkpoint_lock, self._lock:
                if self._checkpoint_conn is not None:
                    self._checkpoint_conn.close()
                    self._checkpoint_conn = None
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                self._owner.release()

        await anyio.to_thread.run_sync(run)


def _open_failure(state_dir: Path, exc: sqlite3.Error | OSError) -> StoreError:
    """A readable StoreError for a state dir that cannot be used (not a directory, not writable, ...)."""
    if isinstance(exc, NotADirectoryError | FileExistsError):
        reason = "it (or a directory above it) is a file, not a directory"
    elif isinstance(exc, PermissionError) or getattr(exc, "errno", None) == errno.EROFS:
        reason = "the directory is not writable"
    elif isinstance(exc, OSError):
        reason = (exc.strerror or str(exc)).lower()
    else:
        reason = str(exc)
    return StoreError(f"cannot open the session store in {state_dir}: {reason}; choose another with --state-dir")


_FORKED_TURNS = "SELECT turn_id FROM turns WHERE session_id = :source AND ordinal <= :last AND status != 'running'"
_FORKED_MESSAGE = f"(turn_id IN ({_FORKED_TURNS}) OR (turn_id IS NULL AND seq <= :cut))"
"""A message the fork copies: one of a copied turn's, or one without a turn from before the cut."""


class _Busy(Exception):
    """SQLITE_BUSY on the event loop (see `_store_errors`)."""


@contextmanager
def _store_errors(*, on_loop: bool = False) -> Generator[None]:
    """SQLite's, pydantic's and JSON's errors as `StoreError`; on the event loop, where nothing waits
    (`busy_timeout = 0`), SQLITE_BUSY as `_Busy`: the caller retries in a worker thread, which waits."""
    try:
        yield
    except sqlite3.Error as exc:
        if on_loop and is_busy(exc):
            raise _Busy from exc
        raise StoreError(f"session store: {exc}") from exc
    except (ValidationError, json.JSONDecodeError) as exc:
        raise StoreError(f"session store: {exc}") from exc
    except UnicodeError as exc:  # text sqlite cannot encode (a lone surrogate)
        raise StoreError(f"session store: cannot encode the record: {exc}") from exc


def _history(
    conn: sqlite3.Connection, session_id: str, cache: HistoryCache, *, max_chars: int | None = None
) -> SessionHistory:
    """The summary and the live messages (those `cache` remembers are not read again); with `max_chars`,
    `HistoryTooLarge` past that many characters read."""
    row = conn.execute("SELECT summary FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    if row is None:
        cache.forget(session_id)
        raise SessionNotFound(session_id)
    summary: str | None = row[0]
    through = cache.remembered_through(session_id)
    prefix = live_prefix(conn, session_id, through) if through else (None, 0)
    resume = cache.resume(session_id, summary=summary, live_prefix=prefix)
    if max_chars is not None:
        max_chars -= 0 if resume.after else len(summary or "")
        if max_chars < 0:
            raise HistoryTooLarge
    rows = live_messages(conn, session_id, after=resume.after, max_chars=max_chars)
    return cache.history(session_id, summary, resume, rows)


def _fork(conn: sqlite3.Connection, source: str, target: str, at_turn: str | None, title: str | None) -> SessionInfo:
    old, owner = get_session(conn, source), session_owner(conn, source)
    where: dict[str, Any] = {"source": source, "last": 2**62 if at_turn is None else _fork_point(conn, source, at_turn)}
    where["cut"] = conn.execute(
        f"SELECT coalesce(max(seq), 0) FROM messages WHERE session_id = :source AND turn_id IN ({_FORKED_TURNS})", where
    ).fetchone()[0]
    # Compactions are kept only while everything they could have archived is in the fork: up to
    # the first message the fork leaves out (a later-started turn that finished first).
    clean = conn.execute(
        "SELECT coalesce(min(seq), :cut + 1) - 1 FROM messages"
        f" WHERE session_id = :source AND seq <= :cut AND NOT {_FORKED_MESSAGE}",
        where,
    ).fetchone()[0]
    compactions = conn.execute(
        "SELECT record, archive_through_seq, head_seq FROM compactions"
        " WHERE session_id = ? AND head_seq <= ? ORDER BY ordinal",
        (source, clean),
    ).fetchall()
    summary, archived_through = None, 0
    for record, through, _ in compactions:
        compaction = CompactionRecord.model_validate(json.loads(record))
        if not compaction.dry_run:
            summary, archived_through = compaction.summary, through
    now = utc_now()
    conn.execute(
        "INSERT INTO sessions (session_id, title, metadata, created_at, updated_at, summary, principal)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (target, common.fork_title(old.title, title), json.dumps(old.metadata), now, now, summary, owner),
    )
    conn.execute(
        "INSERT INTO messages (session_id, seq, turn_id, message, archived)"
        f" SELECT :target, seq, turn_id, message, seq <= :archived FROM messages"
        f" WHERE session_id = :source AND {_FORKED_MESSAGE}",
        {**where, "target": target, "archived": archived_through},
    )
    conn.executemany(
        "INSERT INTO compactions (session_id, record, archive_through_seq, head_seq) VALUES (?, ?, ?, ?)",
        [(target, *row) for row in compactions],
    )
    _copy_turns(conn, source, target, where["last"])
    return get_session(conn, target)


def _fork_point(conn: sqlite3.Connection, session_id: str, turn_id: str) -> int:
    """The ordinal of the turn to fork after; InvalidArgument while it is still running."""
    ordinal = turn_ordinal(conn, session_id, turn_id)
    status = conn.execute("SELECT status FROM turns WHERE ordinal = ?", (ordinal,)).fetchone()[0]
    if status == "running":
        raise InvalidArgument(common.fork_running_message(turn_id))
    return ordinal


def _copy_turns(conn: sqlite3.Connection, source: str, target: str, last_turn: int) -> None:
    rows = conn.execute(
        "SELECT record, owner FROM turns WHERE session_id = ? AND ordinal <= ? AND status != 'running'"
        " ORDER BY ordinal",
        (source, last_turn),
    ).fetchall()
    for record, owner in rows:
        copy = TurnRecord.model_validate(json.loads(record)).model_copy(update={"session_id": target})
        conn.execute(
            "INSERT INTO turns (session_id, turn_id, status, record, owner) VALUES (?, ?, ?, ?, ?)",
            (target, copy.turn_id, copy.status, dump(copy), owner),
        )
