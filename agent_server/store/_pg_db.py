"""PostgresStore's database plumbing: schema and migrations, advisory-lock keys, owner liveness, queries.

Every statement here runs on a psycopg 3 async connection inside the caller's transaction.
"""

from __future__ import annotations

import json
import logging
from typing import Any, LiteralString

from psycopg import AsyncConnection

from agent_server.errors import SessionNotFound, StoreError, TurnNotFound
from agent_server.store import _common as common
from agent_server.types import UNTITLED, SessionInfo, StoredMessage, TurnRecord, utc_now

logger = logging.getLogger(__name__)

Conn = AsyncConnection[tuple[Any, ...]]

LOCK_SPACE = 0x41530001
"""The first key of every per-session turn lock, `pg_advisory_lock(LOCK_SPACE, hashtext(session_id))`.

Owners' liveness locks use the one-bigint form, which PostgreSQL keeps apart from the two-int form."""
MIGRATION_LOCK = (0x41530000, 0)
"""Held (transaction-level) while a replica migrates, so replicas starting together migrate once."""
CANCEL_CHANNEL = "agent_server_cancel"
"""NOTIFY payload: the id of a turn to cancel, wherever it runs."""
ENDED_CHANNEL = "agent_server_turn_ended"
"""NOTIFY payload: the id of a turn whose final record was just stored (wakes remote cancellers)."""

_SCHEMA_V1 = """
CREATE TABLE sessions (
    ordinal BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL, -- a JSON string (see `text`)
    metadata TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    summary TEXT
);
CREATE TABLE messages (
    session_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    turn_id TEXT,
    message TEXT NOT NULL,
    archived BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX messages_live ON messages (session_id, seq) WHERE NOT archived;
CREATE TABLE turns (
    ordinal BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    status TEXT NOT NULL,
    record TEXT NOT NULL,
    owner TEXT NOT NULL,
    owner_key BIGINT NOT NULL,
    UNIQUE (session_id, turn_id)
);
CREATE INDEX turns_by_session ON turns (session_id, ordinal);
CREATE INDEX turns_by_id ON turns (turn_id);
CREATE INDEX turns_running ON turns (owner_key) WHERE status = 'running';
CREATE TABLE compactions (
    ordinal BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id TEXT NOT NULL,
    record TEXT NOT NULL,
    archive_through_seq BIGINT NOT NULL,
    head_seq BIGINT NOT NULL
);
CREATE INDEX compactions_by_session ON compactions (session_id, ordinal);
CREATE TABLE approvals (
    session_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (session_id, tool)
);
"""
_V1_TO_V2 = """
CREATE TABLE tasks (
    task_id TEXT PRIMARY KEY,
    turn_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    detail TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX tasks_by_session ON tasks (session_id);
"""
"""Version 2 shares MCP tasks without a connection (2026-07-28 over HTTP) between replicas: `SharedTask`."""
_V2_TO_V3 = """
CREATE TABLE turn_leases (
    session_id TEXT PRIMARY KEY,
    epoch BIGINT NOT NULL,
    holder BIGINT
);
"""
"""Version 3 fences the turn lock: each session's lease epoch, bumped by each new holder, and the holder's
`owner_key` (NULL once released). See `claim_lease`."""
_V3_TO_V4 = """
ALTER TABLE sessions ADD COLUMN principal TEXT NOT NULL DEFAULT 'local';
CREATE INDEX sessions_by_principal ON sessions (principal, ordinal);
ALTER TABLE tasks ADD COLUMN principal TEXT NOT NULL DEFAULT 'local';
"""
"""Version 4 records whose each session and shared task is (its principal; those of before belong to `local`, the
principal of stdio and of unauthenticated loopback HTTP)."""
_V4_TO_V5 = """
CREATE TABLE questions (
    question_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    principal TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    question TEXT NOT NULL,
    answer TEXT
);
CREATE INDEX questions_by_principal ON questions (principal, expires_at);
"""
"""Version 5 keeps the web view's pending approvals (`PendingApproval`), for the pages of every replica."""
_V5_TO_V6 = """
CREATE OR REPLACE FUNCTION agent_server_finish_turn(
    p_session TEXT, p_turn TEXT, p_status TEXT, p_record TEXT, p_owner TEXT, p_key BIGINT,
    p_title TEXT, p_untitled TEXT, p_now TEXT, p_messages TEXT[], p_epoch BIGINT, p_channel TEXT
) RETURNS INTEGER LANGUAGE plpgsql AS $$
DECLARE
    v_epoch BIGINT;
    v_head BIGINT;
BEGIN
    SELECT (SELECT l.epoch FROM turn_leases l WHERE l.session_id = s.session_id FOR SHARE) INTO v_epoch
        FROM sessions s WHERE s.session_id = p_session FOR UPDATE OF s;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    IF p_epoch IS NOT NULL AND v_epoch IS DISTINCT FROM p_epoch THEN
        RETURN 2;
    END IF;
    SELECT coalesce(max(seq), 0) INTO v_head FROM messages WHERE session_id = p_session;
    INSERT INTO turns (session_id, turn_id, status, record, owner, owner_key)
        VALUES (p_session, p_turn, p_status, p_record, p_owner, p_key)
        ON CONFLICT (session_id, turn_id) DO UPDATE SET status = excluded.status, record = excluded.record;
    INSERT INTO messages (session_id, seq, turn_id, message)
        SELECT p_session, v_head + m.n, p_turn, m.message
        FROM unnest(p_messages) WITH ORDINALITY AS m(message, n);
    UPDATE sessions SET updated_at = p_now,
        title = CASE WHEN p_title IS NOT NULL AND title = p_untitled THEN p_title ELSE title END
        WHERE session_id = p_session;
    PERFORM pg_notify(p_channel, p_turn);
    RETURN 1;
END
$$;
"""
"""Version 6 writes a turn's end in one statement, a function (`FINISH_TURN`): the session's row locked and the lease
epoch share-locked (as `WRITE_LOCK_BEGIN` does), the fencing check against `p_epoch` (NULL: none), the head seq, the
final record, the messages, the session touched (and titled) and the NOTIFY that wakes `wait_ended`. It returns 0
when the session is gone, 2 when the check failed (nothing written), 1 when written. In a function each statement
reads a snapshot of its own (PL/pgSQL, read committed), so the head seq is read after the lock is had, and holds what
a writer it waited for committed. One round trip and one statement in place of five over two (bench/README.md,
"PostgreSQL: a turn's end in one statement")."""
_MIGRATIONS = [_SCHEMA_V1, _V1_TO_V2, _V2_TO_V3, _V3_TO_V4, _V4_TO_V5, _V5_TO_V6]
"""`_MIGRATIONS[n]` takes the schema from version n to n + 1: append to migrate."""
SCHEMA_VERSION = len(_MIGRATIONS)


async def migrate(conn: Conn) -> None:
    """Bring the schema up to date in one transaction; refuse a schema newer than this code knows."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", MIGRATION_LOCK)
        await conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = await (await conn.execute("SELECT max(version) FROM schema_version")).fetchone()
        version: int = (row[0] if row else None) or 0
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the PostgreSQL store has schema version {version}, newer than this agent-server's {SCHEMA_VERSION}"
            )
        for script in _MIGRATIONS[version:]:
            await conn.execute(script.encode())
        if version < SCHEMA_VERSION:
            await conn.execute("DELETE FROM schema_version")
            await conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (SCHEMA_VERSION,))


# --- owners: which replica runs a turn, and whether it is still alive ----------------------


async def interrupt_dead_owners(conn: Conn, me: int, session_id: str | None = None) -> int:
    """Mark `interrupted` the running turns (of one session, or all) whose owner's liveness lock is free.

    A replica holds `pg_advisory_lock(owner_key)` on a connection of its own for its lifetime; the
    server drops it when that connection ends, however the replica ended. Taking it here
    (transaction-level) proves the owner gone and keeps it taken until this transaction commits.
    """
    where = "status = 'running' AND owner_key <> %s" + ("" if session_id is None else " AND session_id = %s")
    params: tuple[Any, ...] = (me,) if session_id is None else (me, session_id)
    owners = await (await conn.execute(f"SELECT DISTINCT owner_key FROM turns WHERE {where}", params)).fetchall()
    count = 0
    for (owner_key,) in owners:
        row = await (await conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (owner_key,))).fetchone()
        if row and row[0]:
            count += await _interrupt_turns_of(conn, owner_key)
    if count:
        logger.warning("marked %d turn(s) of dead server instances interrupted", count)
    return count


async def _interrupt_turns_of(conn: Conn, owner_key: int) -> int:
    rows = await (
        await conn.execute(
            "SELECT ordinal, record FROM turns WHERE status = 'running' AND owner_key = %s FOR UPDATE", (owner_key,)
        )
    ).fetchall()
    for ordinal, record in rows:
        stopped = common.interrupted(TurnRecord.model_validate(json.loads(record)))
        await conn.execute(
            "UPDATE turns SET status = %s, record = %s WHERE ordinal = %s",
            (stopped.status, common.dump(stopped), ordinal),
        )
    return len(rows)


# --- turn leases: the fencing token of a session's turn lock --------------------------


async def claim_lease(conn: Conn, session_id: str, me: int, *, take_over: bool) -> int | None:
    """Become the session's lease holder and return the new epoch; None while another holder has it.

    Called by the holder of the session's turn lock, on an autocommit connection. A lease still held by another
    replica means that replica lost its lock connection while its turn ran and has not stopped it yet: the caller
    waits (`None`) unless that replica is gone or `take_over` (it had the time to notice). A session that does not
    exist gets no lease (epoch 0): every write to it fails as it would anyway. One statement when the lease is
    free (or this replica's, or taken over), which is every turn but the first after such a loss.
    """
    claimed = await one(conn, _CLAIM_FREE, {"session": session_id, "me": me, "take_over": take_over})
    if claimed is not None:
        return int(claimed[0])
    async with conn.transaction():
        return await _claim_held(conn, session_id, me, take_over=take_over)


_CLAIM_FREE: LiteralString = (
    "INSERT INTO turn_leases (session_id, epoch, holder)"
    " SELECT session_id, 1, %(me)s FROM sessions WHERE session_id = %(session)s"
    " ON CONFLICT (session_id) DO UPDATE SET epoch = turn_leases.epoch + 1, holder = excluded.holder"
    " WHERE turn_leases.holder IS NULL OR turn_leases.holder = excluded.holder OR %(take_over)s"
    " RETURNING epoch"
)
"""The claim of a free lease: nothing is returned when the session is gone or another replica holds it."""


async def _claim_held(conn: Conn, session_id: str, me: int, *, take_over: bool) -> int | None:
    if await one(conn, "SELECT 1 FROM sessions WHERE session_id = %s", (session_id,)) is None:
        return 0
    row = await one(conn, "SELECT epoch, holder FROM turn_leases WHERE session_id = %s FOR UPDATE", (session_id,))
    if row is not None and row[1] is not None and row[1] != me and not take_over:
        gone = await one(conn, "SELECT pg_try_advisory_xact_lock(%s)", (row[1],))  # its liveness lock is free
        if not (gone and gone[0]):
            return None
    claimed = await one(
        conn,
        "INSERT INTO turn_leases (session_id, epoch, holder) VALUES (%s, 1, %s) ON CONFLICT (session_id)"
        " DO UPDATE SET epoch = turn_leases.epoch + 1, holder = excluded.holder RETURNING epoch",
        (session_id, me),
    )
    assert claimed is not None
    return int(claimed[0])


async def holds_lease(conn: Conn, session_id: str, epoch: int) -> bool:
    """Whether `epoch` is still the session's lease; the row stays share-locked until the caller commits,
    so no new holder can take the lease between this check and the caller's write."""
    row = await one(conn, "SELECT epoch FROM turn_leases WHERE session_id = %s FOR SHARE", (session_id,))
    return row is not None and row[0] == epoch


async def release_lease(conn: Conn, session_id: str, epoch: int) -> None:
    """Give the lease up (a later holder's lease is left alone)."""
    await conn.execute("UPDATE turn_leases SET holder = NULL WHERE session_id = %s AND epoch = %s", (session_id, epoch))


RELEASE_AND_UNLOCK: LiteralString = (
    "WITH released AS (UPDATE turn_leases SET holder = NULL WHERE session_id = %(session)s AND epoch = %(epoch)s)"
    " SELECT pg_advisory_unlock(%(space)s, hashtext(%(session)s))"
)
"""On the connection holding the session's turn lock: give the lease up (epoch -1: none) and the lock, in one trip."""

WRITE_LOCK_BEGIN: LiteralString = (
    "SELECT s.summary, (SELECT l.epoch FROM turn_leases l WHERE l.session_id = s.session_id FOR SHARE),"
    " ARRAY(SELECT DISTINCT t.owner_key FROM turns t"
    " WHERE t.session_id = s.session_id AND t.status = 'running' AND t.owner_key <> %(me)s)"
    " FROM sessions s WHERE s.session_id = %(session)s FOR UPDATE OF s"
)
"""What `begin_turn` locks and checks in one statement: the session's row (its writes queue), the lease epoch
(share-locked: no new holder can take it before this transaction commits, the fencing check of `holds_lease`),
the summary its history starts from, and the other owners' running turns (to mark the dead ones' interrupted)."""

TOUCH: LiteralString = (
    "UPDATE sessions SET updated_at = %(now)s,"
    " title = CASE WHEN %(title)s::text IS NOT NULL AND title = %(untitled)s THEN %(title)s ELSE title END"
    " WHERE session_id = %(session)s"
)
"""`touch` as a part of the turn's writes: `title` (stored as `text`, or NULL for none) names an `UNTITLED` session.
`agent_server_finish_turn` (`_V5_TO_V6`) makes the same update in PL/pgSQL: a change here belongs there too."""


BEGIN_WRITES: LiteralString = (
    f"WITH touched AS ({TOUCH})"
    " INSERT INTO turns (session_id, turn_id, status, record, owner, owner_key)"
    " VALUES (%(session)s, %(turn)s, %(status)s, %(record)s, %(owner)s, %(key)s)"
)
"""`begin_turn`'s writes in one statement: the running turn's row, the session touched (and titled)."""

FINISH_TURN: LiteralString = (
    "SELECT agent_server_finish_turn(%(session)s, %(turn)s, %(status)s, %(record)s, %(owner)s, %(key)s::bigint,"
    " %(title)s::text, %(untitled)s, %(now)s, %(messages)b::text[], %(epoch)s::bigint, %(channel)s)"
)
"""`finish_turn` in one statement (version 6's function). The messages go as a binary array (`%b`): the text form
quotes each element, every quote and backslash of its JSON escaped by a regex in psycopg (0.15-0.7 ms of CPU a turn:
bench/README.md, "PostgreSQL: where the turn's extra time goes, and one cut")."""
FINISHED, FINISH_FENCED = 1, 2
"""What `FINISH_TURN` returns when it wrote the turn's end, and when the fencing check refused it (0: no session)."""

LIVE_AFTER: LiteralString = (
    "SELECT p.first, p.n, m.seq, m.turn_id, m.message FROM"
    " (SELECT min(seq) AS first, count(*) AS n FROM messages"
    " WHERE session_id = %(session)s AND NOT archived AND seq <= %(through)s) p"
    " LEFT JOIN messages m ON m.session_id = %(session)s AND NOT m.archived AND m.seq > %(through)s"
    " ORDER BY m.seq"
)
"""The live messages after `through` and, in the same snapshot, the first live `seq` and the number of live
messages up to `through` (the check of a remembered history: `_history_cache`); one row at least."""


def live_after(rows: list[tuple[Any, ...]]) -> tuple[tuple[int | None, int], list[tuple[StoredMessage, int]]]:
    """`LIVE_AFTER`'s rows: the check, and each message after `through` with the length of its stored JSON."""
    check = (rows[0][0], rows[0][1])
    messages = [
        (common.stored_message(seq, turn_id, text), len(text)) for _, _, seq, turn_id, text in rows if seq is not None
    ]
    return check, messages


def stored_rows(rows: list[tuple[Any, ...]]) -> list[tuple[StoredMessage, bool]]:
    return [(common.stored_message(seq, turn_id, text), archived) for seq, turn_id, text, archived in rows]


# --- queries shared by the store's methods --------------------------------------------

SESSION_COLUMNS = (
    "s.ordinal, s.session_id, s.title, s.metadata, s.created_at, s.updated_at,"
    " (SELECT count(*) FROM turns t WHERE t.session_id = s.session_id)"
)


def text(value: str) -> str:
    """A client's free text as stored: a JSON string, since PostgreSQL text cannot hold NUL characters."""
    return json.dumps(value, ensure_ascii=False)


def session_info(row: tuple[Any, ...]) -> SessionInfo:
    _, session_id, title, metadata, created_at, updated_at, turn_count = row
    return SessionInfo(
        session_id=session_id,
        title=json.loads(title),
        metadata=json.loads(metadata),
        created_at=created_at,
        updated_at=updated_at,
        turn_count=turn_count,
    )


async def one(conn: Conn, sql: LiteralString, params: Any = None) -> tuple[Any, ...] | None:
    return await (await conn.execute(sql, params)).fetchone()


async def require_session(conn: Conn, session_id: str, *, lock: bool = False) -> None:
    """SessionNotFound unless the session exists; `lock` takes its row lock, serialising the session's writes."""
    sql = "SELECT 1 FROM sessions WHERE session_id = %s" + (" FOR UPDATE" if lock else "")
    if await one(conn, sql, (session_id,)) is None:
        raise SessionNotFound(session_id)


async def session_owner(conn: Conn, session_id: str) -> str:
    row = await one(conn, "SELECT principal FROM sessions WHERE session_id = %s", (session_id,))
    if row is None:
        raise SessionNotFound(session_id)
    return row[0]


async def get_session(conn: Conn, session_id: str) -> SessionInfo:
    row = await one(conn, f"SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.session_id = %s", (session_id,))
    if row is None:
        raise SessionNotFound(session_id)
    return session_info(row)


async def turn_row(conn: Conn, session_id: str, turn_id: str) -> tuple[int, str]:
    """The turn's (ordinal, status); TurnNotFound."""
    row = await one(
        conn, "SELECT ordinal, status FROM turns WHERE session_id = %s AND turn_id = %s", (session_id, turn_id)
    )
    if row is None:
        raise TurnNotFound(session_id, turn_id)
    return row[0], row[1]


async def head_seq(conn: Conn, session_id: str) -> int:
    row = await one(conn, "SELECT coalesce(max(seq), 0) FROM messages WHERE session_id = %s", (session_id,))
    assert row is not None
    return int(row[0])


async def archived_since(conn: Conn, session_id: str, seq: int) -> bool:
    sql = "SELECT 1 FROM messages WHERE session_id = %s AND seq >= %s AND archived LIMIT 1"
    return await one(conn, sql, (session_id, seq)) is not None


async def touch(conn: Conn, session_id: str, *, title: str | None = None) -> None:
    """Mark the session updated now, and give it `title` if it has none (`UNTITLED`)."""
    if title is None:
        await conn.execute("UPDATE sessions SET updated_at = %s WHERE session_id = %s", (utc_now(), session_id))
        return
    await conn.execute(
        "UPDATE sessions SET updated_at = %s, title = CASE WHEN title = %s THEN %s ELSE title END"
        " WHERE session_id = %s",
        (utc_now(), text(UNTITLED), text(title), session_id),
    )


async def stored_messages(
    conn: Conn, session_id: str, *, live_only: bool = False, after: int = 0, limit: int | None = None
) -> list[tuple[StoredMessage, bool]]:
    """The session's messages by seq (after `after`, at most `limit`); `live_only` skips archived ones in SQL."""
    live = " AND NOT archived" if live_only else ""
    rows = await (
        await conn.execute(
            f"SELECT seq, turn_id, message, archived FROM messages WHERE session_id = %s AND seq > %s{live}"
            " ORDER BY seq LIMIT %s",
            (session_id, after, limit),
        )
    ).fetchall()
    return stored_rows(rows)
