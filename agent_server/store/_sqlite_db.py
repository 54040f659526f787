"""SqliteStore's database plumbing: schema and migrations, connections, transactions, crash recovery."""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
from collections.abc import Generator, Iterable
from pathlib import Path
from typing import Any

from agent_server.errors import SessionNotFound, StoreError, TurnNotFound
from agent_server.store import _common as common
from agent_server.store._common import dump
from agent_server.store._loop_writes import HistoryTooLarge
from agent_server.store._owners import dead_owner, known_owners
from agent_server.types import UNTITLED, SessionInfo, StoredMessage, TurnRecord, utc_now

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 10.0
_SCHEMA_V1 = """
CREATE TABLE sessions (
    ordinal INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    metadata TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    summary TEXT
);
CREATE TABLE messages (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    turn_id TEXT,
    message TEXT NOT NULL,
    archived INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
CREATE TABLE turns (
    ordinal INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    status TEXT NOT NULL,
    record TEXT NOT NULL,
    owner TEXT NOT NULL,
    UNIQUE (session_id, turn_id)
);
CREATE INDEX turns_by_session ON turns (session_id, ordinal);
CREATE INDEX turns_by_status ON turns (status, owner);
CREATE TABLE compactions (
    ordinal INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    record TEXT NOT NULL,
    archive_through_seq INTEGER NOT NULL,
    head_seq INTEGER NOT NULL
);
CREATE INDEX compactions_by_session ON compactions (session_id, ordinal);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_V1_TO_V2 = """
DELETE FROM meta WHERE key = 'active';
"""
"""Version 1 stored one active session for every process; it is per connection and in memory now."""
_V2_TO_V3 = """
CREATE TABLE approvals (
    session_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (session_id, tool)
) WITHOUT ROWID;
"""
"""Version 3 remembers `allow_session` approvals: one row per (session, agent-side tool name)."""
_V3_TO_V4 = """
CREATE INDEX messages_live ON messages (session_id, seq) WHERE archived = 0;
"""
"""Version 4 indexes the live (not archived) messages: a turn's start reads them, and without the index that read
walks every archived message of the session too (5x the per-turn store cost at 10,000 turns)."""
_V4_TO_V5 = """
ALTER TABLE sessions ADD COLUMN principal TEXT NOT NULL DEFAULT 'local';
CREATE INDEX sessions_by_principal ON sessions (principal, ordinal);
CREATE INDEX turns_by_id ON turns (turn_id);
"""
"""Version 5 records whose each session is (its principal; the sessions of before belong to `local`, the principal
of stdio and of unauthenticated loopback HTTP), and finds a turn by its id alone."""
_V5_TO_V6 = """
CREATE TABLE questions (
    question_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    principal TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    question TEXT NOT NULL,
    answer TEXT
) WITHOUT ROWID;
CREATE INDEX questions_by_principal ON questions (principal, expires_at);
"""
"""Version 6 keeps the web view's pending approvals (`PendingApproval`), for the pages of every process."""
_MIGRATIONS = [
    _SCHEMA_V1,
    _V1_TO_V2,
    _V2_TO_V3,
    _V3_TO_V4,
    _V4_TO_V5,
    _V5_TO_V6,
]  # _MIGRATIONS[n] takes the schema from version n to n + 1: append to migrate
SCHEMA_VERSION = len(_MIGRATIONS)


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection, *, write: bool) -> Generator[sqlite3.Connection]:
    conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


BUSY_WAIT = f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}"
"""A worker thread's transaction waits for a busy database."""
BUSY_FAIL = "PRAGMA busy_timeout = 0"
"""A transaction on the event loop does not: `SQLITE_BUSY` at once, and it runs in a worker thread instead."""


def connect(path: Path) -> sqlite3.Connection:
    """A connection with per-connection settings only: nothing in the file changes until `migrate`. Automatic
    checkpoints are off (a commit on the event loop must not run one); the store checkpoints in a worker
    thread (`_loop_writes`)."""
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    conn.execute(BUSY_WAIT)
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    return conn


def checkpoint(conn: sqlite3.Connection) -> int:
    """Copy the WAL into the database as far as no reader needs it (PASSIVE: never waits for one); the frames
    the WAL held (-1 when the database is not in WAL mode)."""
    row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return -1 if row is None else int(row[1])


def migrate(conn: sqlite3.Connection) -> None:
    """Refuse a newer schema before touching the file; then switch to WAL and bring the schema up to date."""
    _check_version(conn)
    conn.execute("PRAGMA journal_mode = WAL")  # persistent: only for a database this version can use
    with transaction(conn, write=True):
        version = _check_version(conn)  # again inside the transaction: another process may have migrated
        for script in _MIGRATIONS[version:]:
            for statement in script.split(";"):
                if statement.strip():
                    conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _check_version(conn: sqlite3.Connection) -> int:
    version: int = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise StoreError(f"state.db has schema version {version}, newer than this agent-server's {SCHEMA_VERSION}")
    return version


def interrupt_dead_owners(conn: sqlite3.Connection, owners_dir: Path, me: str) -> None:
    """Mark the running turns of every owner but `me` whose process is gone `interrupted`; drop their lock files."""
    running = {row[0] for row in conn.execute("SELECT DISTINCT owner FROM turns WHERE status = 'running'")}
    for owner in (running | known_owners(owners_dir)) - {me}:
        with dead_owner(owners_dir, owner) as dead:
            if dead and owner in running:
                with transaction(conn, write=True):
                    count = _interrupt_turns_of(conn, owner)
                logger.warning("marked %d turn(s) of dead server instance %s interrupted", count, owner)


def _interrupt_turns_of(conn: sqlite3.Connection, owner: str) -> int:
    rows = conn.execute("SELECT ordinal, record FROM turns WHERE status = 'running' AND owner = ?", (owner,)).fetchall()
    for ordinal, record in rows:
        stopped = common.interrupted(TurnRecord.model_validate(json.loads(record)))
        conn.execute(
            "UPDATE turns SET status = ?, record = ? WHERE ordinal = ?", (stopped.status, dump(stopped), ordinal)
        )
    return len(rows)


# --- queries shared by the store's methods --------------------------------------------

SESSION_COLUMNS = (
    "s.ordinal, s.session_id, s.title, s.metadata, s.created_at, s.updated_at,"
    " (SELECT count(*) FROM turns t WHERE t.session_id = s.session_id)"
)


def session_info(row: Any) -> SessionInfo:
    _, session_id, title, metadata, created_at, updated_at, turn_count = row
    return SessionInfo(
        session_id=session_id,
        title=title,
        metadata=json.loads(metadata),
        created_at=created_at,
        updated_at=updated_at,
        turn_count=turn_count,
    )


def require_session(conn: sqlite3.Connection, session_id: str) -> None:
    if conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)).fetchone() is None:
        raise SessionNotFound(session_id)


def session_owner(conn: sqlite3.Connection, session_id: str) -> str:
    row = conn.execute("SELECT principal FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    if row is None:
        raise SessionNotFound(session_id)
    return row[0]


def get_session(conn: sqlite3.Connection, session_id: str) -> SessionInfo:
    row = conn.execute(f"SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.session_id = ?", (session_id,)).fetchone()
    if row is None:
        raise SessionNotFound(session_id)
    return session_info(row)


def turn_ordinal(conn: sqlite3.Connection, session_id: str, turn_id: str) -> int:
    row = conn.execute(
        "SELECT ordinal FROM turns WHERE session_id = ? AND turn_id = ?", (session_id, turn_id)
    ).fetchone()
    if row is None:
        raise TurnNotFound(session_id, turn_id)
    return row[0]


def head_seq(conn: sqlite3.Connection, session_id: str) -> int:
    return conn.execute("SELECT coalesce(max(seq), 0) FROM messages WHERE session_id = ?", (session_id,)).fetchone()[0]


def archived_since(conn: sqlite3.Connection, session_id: str, seq: int) -> bool:
    """True when a message of the session with `seq` or later is archived."""
    row = conn.execute(
        "SELECT 1 FROM messages WHERE session_id = ? AND seq >= ? AND archived = 1 LIMIT 1", (session_id, seq)
    ).fetchone()
    return row is not None


def touch(conn: sqlite3.Connection, session_id: str, *, title: str | None = None) -> bool:
    """Mark the session updated now, and give it `title` if it has none (`UNTITLED`); False when there is no
    such session."""
    if title is None:
        cursor = conn.execute("UPDATE sessions SET updated_at = ? WHERE session_id = ?", (utc_now(), session_id))
    else:
        cursor = conn.execute(
            "UPDATE sessions SET updated_at = ?, title = CASE WHEN title = ? THEN ? ELSE title END"
            " WHERE session_id = ?",
            (utc_now(), UNTITLED, title, session_id),
        )
    return cursor.rowcount > 0


def stored_messages(
    conn: sqlite3.Connection, session_id: str, *, after: int = 0, limit: int = -1
) -> list[tuple[StoredMessage, bool]]:
    """The session's messages by seq (after `after`, at most `limit`), archived ones included, with the flag."""
    rows = conn.execute(
        "SELECT seq, turn_id, message, archived FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        (session_id, after, limit),
    )
    return [(common.stored_message(seq, turn_id, text), bool(archived)) for seq, turn_id, text, archived in rows]


def live_prefix(conn: sqlite3.Connection, session_id: str, through: int) -> tuple[int | None, int]:
    """The `seq` of the session's first live (not archived) message (None: none), and how many live messages
    it has up to `through`."""
    row = conn.execute(
        "SELECT min(seq), count(*) FROM messages INDEXED BY messages_live"
        " WHERE session_id = ? AND archived = 0 AND seq <= ?",
        (session_id, through),
    ).fetchone()
    return row[0], row[1]


def live_messages(
    conn: sqlite3.Connection, session_id: str, *, after: int, max_chars: int | None
) -> list[tuple[StoredMessage, int]]:
    """The session's live messages after `after`, by seq, each with the length of its stored JSON.

    Raises:
        HistoryTooLarge: `max_chars` is given and the messages' JSON is longer (counted before any is parsed).
    """
    # INDEXED BY: the planner would take the primary key (same prefix) without statistics, and walk every
    # archived row; `messages_live` holds the live ones only.
    rows: Iterable[tuple[int, str | None, str]] = conn.execute(
        "SELECT seq, turn_id, message FROM messages INDEXED BY messages_live"
        " WHERE session_id = ? AND seq > ? AND archived = 0 ORDER BY seq",
        (session_id, after),
    )
    if max_chars is not None:
        rows = _within(rows, max_chars)
    return [(common.stored_message(seq, turn_id, text), len(text)) for seq, turn_id, text in rows]


def _within(rows: Iterable[tuple[int, str | None, str]], max_chars: int) -> list[tuple[int, str | None, str]]:
    kept: list[tuple[int, str | None, str]] = []
    for row in rows:
        max_chars -= len(row[2])
        if max_chars < 0:
            raise HistoryTooLarge
        kept.append(row)
    return kept
