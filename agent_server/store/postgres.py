"""PostgresStore: the session store on PostgreSQL (psycopg 3, async), shared by several server replicas.

Selected by `--store postgresql://...` (or the `store_url` setting, or `AGENT_SERVER_STORE`); needs
the optional extra: `pip install 'agent-server[postgres]'`. The database holds everything that is
shared: sessions, history, turn records, compactions, approvals; the tables live in the first schema
of the connection's `search_path` (use `?options=-csearch_path%3Dmyschema` to pick one).

Across replicas (DESIGN 5, "Scale-out"):

- Turn order: `hold_turn` takes `pg_advisory_lock(LOCK_SPACE, hashtext(session_id))` on a connection
  of its own and keeps it for the turn; a turn of the same session on another replica waits there
  (bounded by its deadline). The lock goes with its connection, also when the replica dies.
- Fencing: the lock also goes when only its connection dies (killed, network lost) while this replica
  runs the turn, so the holder claims a lease too (`turn_leases`: an epoch bumped by each new holder).
  Every write the turn makes to its session (begin, final record and history, compaction) checks in its
  transaction that the epoch is still its own, else raises `TurnLockLost` and writes only the turn's own
  record (`failed`). The holder checks its lock connection every `LOCK_CHECK_S` and stops the block
  (`TurnLockLost`) when it is gone; a new holder waits for a live previous holder to give the lease up
  (it has stopped its turn), at most `LEASE_DRAIN_S`, so a session's turns never overlap.
- Liveness: each store holds a session-level advisory lock on a random 63-bit key (its `owner_key`,
  stored with every turn it begins) on its *owner connection*, for its lifetime. A running turn whose
  owner's lock can be taken belongs to a replica that is gone: it is marked `interrupted` when a store
  opens, when a turn of its session begins, and when it is read (`get_turn`, `list_turns`).
- Cancellation: `request_cancel` sends NOTIFY on `agent_server_cancel`; every store LISTENs on its
  owner connection and `serve_notifications` hands the turn ids to the runtime, which cancels the
  turn if it runs it. `finish_turn` notifies `agent_server_turn_ended`, which `wait_ended` waits for.

Connections: a pool of `QUERY_CONNECTIONS` for queries; one *shared lock connection* holding the turn locks
taken while free (every running turn's, as a rule: one connection holds any number of advisory locks); a pool of
up to `TURN_CONNECTIONS` for turns that wait for a lock another holder has (each then holds it on its own
connection); and the owner connection. So a replica's concurrent turns are not bounded by connections, and the
database sees a handful per replica. The URL's password never reaches a log or an error (`redaction.redact_url`).

Round trips of a one-call turn in a new session (psycopg's pipeline mode, checks folded into the statements that
need them): `create_session` 1, the turn lock 1, the lease 1, `begin_turn` 2, `finish_turn` 2, releasing the lock
and the lease 1; 14 statements, each of which costs psycopg about 0.1 ms of CPU, plus each round trip's wait
(bench/README.md, "Load over Streamable HTTP": 2.29x a turn on SQLite, from 2.89x).
"""

from __future__ import annotations

import json
import logging
import math
import secrets
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import psycopg
import psycopg_pool
from psycopg_pool import AsyncConnectionPool

from agent_server.errors import (
    STORE_ERROR,
    CompactionConflict,
    InvalidArgument,
    SessionNotFound,
    StoreError,
    TurnLockLost,
)
from agent_server.redaction import redact_url
from agent_server.store import _common as common
from agent_server.store import _pg_db as db
from agent_server.store._history_cache import FROM_START, HistoryCache
from agent_server.store._pg_db import Conn
from agent_server.store.base import MAX_PENDING_LISTED, SharedTask
from agent_server.types import (
    LOCAL_PRINCIPAL,
    UNTITLED,
    CompactionRecord,
    ErrorInfo,
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

QUERY_CONNECTIONS = 8
TURN_CONNECTIONS = 32
"""One per turn waiting for a session's lock that another holder (a replica, or this store) has; more such turns
wait for one."""
CONNECT_TIMEOUT_S = 10
RECONNECT_MAX_S = 30.0
"""The longest pause between attempts to connect the lost owner connection again."""
LOCK_CHECK_S = 1.0
"""How often a turn lock's holder checks that the lock's connection still lives (a `SELECT 1`)."""
LOCK_CHECK_TIMEOUT_S = 5.0
"""A check not answered within this counts as a lost connection (the network is gone)."""
LEASE_DRAIN_S = LOCK_CHECK_S + LOCK_CHECK_TIMEOUT_S + 5.0
"""The longest a new holder waits for a live previous holder, which lost its lock connection, to stop its
turn and give the lease up: its check notices within `LOCK_CHECK_S + LOCK_CHECK_TIMEOUT_S`. Past it the
lease is taken over (the fencing alone then keeps the old holder's writes out)."""
LEASE_POLL_S = 0.1


@dataclass
class _Lease:
    """This store's hold of a session's turn lock: the lock's connection and the lease epoch it claimed."""

    conn: Conn
    epoch: int
    shared: bool
    """The lock is held on the store's shared lock connection (`_SharedLocks`), not on a pooled one of its own."""
    lost: bool = False
    """The lock connection was found dead: the turn must stop, and its writes are refused."""


class _SharedLocks:
    """The one connection that holds this store's uncontended turn locks (see "Connections" in the module docstring).

    A session-level advisory lock belongs to its connection, and one connection can hold any number of them, so
    a turn whose lock is free takes it here in one round trip instead of taking a pooled connection for its whole
    run. Used by statements only (never a transaction: the turns share it). Its liveness is checked at most once
    per `LOCK_CHECK_S` for all the turns holding locks on it, and not at all while the turns' own statements on it
    keep succeeding; a connection found dead is replaced, and every lock it held is lost (each holder's check
    sees that). A check that waits longer than `LOCK_CHECK_TIMEOUT_S` finds it dead only when no statement on it
    succeeded meanwhile: under a burst the check waits in line behind the other turns' statements (psycopg runs
    one at a time per connection), and that wait is no loss.
    """

    def __init__(self, url: str) -> None:
        self._url = url
        self._conn: Conn | None = None
        self._opening = anyio.Lock()
        self._checking = anyio.Lock()
        self._answered_at = -math.inf
        """When a statement on the current connection last succeeded (anyio's clock)."""

    def answered(self, conn: Conn) -> None:
        """A statement on `conn` succeeded: it lives."""
        if conn is self._conn:
            self._answered_at = anyio.current_time()

    async def try_lock(self, session_id: str) -> Conn | None:
        """The connection now holding the session's lock, or None when another holder has it. A connection that
        fails is replaced once (it may have died idle, the database restarted)."""
        for attempt in (1, 2):
            conn = await self._current()
            try:
                row = await db.one(conn, "SELECT pg_try_advisory_lock(%s, hashtext(%s))", (db.LOCK_SPACE, session_id))
            except psycopg.Error:
                await self.drop(conn)
                if attempt == 2:
                    raise
                continue
            self.answered(conn)
            return conn if row is not None and row[0] else None
        raise AssertionError("unreachable")

    async def alive(self, conn: Conn) -> bool:
        """Whether `conn` still holds its locks: it is the current connection and answered lately."""
        async with self._checking:
            if conn is not self._conn:
                return False
            if anyio.current_time() - self._answered_at < LOCK_CHECK_S / 2:
                return True
            try:
                # Shielded: the turn whose watcher runs this check may end meanwhile, and a statement cancelled
                # mid-flight makes psycopg close the connection, and so lose every other turn's lock on it.
                with anyio.CancelScope(shield=True), anyio.fail_after(LOCK_CHECK_TIMEOUT_S):
                    await conn.execute("SELECT 1")
            except TimeoutError as exc:
                if not (conn.closed or conn.broken) and anyio.current_time() - self._answered_at < LOCK_CHECK_TIMEOUT_S:
                    return True  # it waited in line behind statements that succeeded (see the class docstring)
                return await self._lost(conn, exc)
            except psycopg.Error as exc:
                return await self._lost(conn, exc)
            self.answered(conn)
            return True

    async def _lost(self, conn: Conn, exc: BaseException) -> bool:
        logger.error("lost the connection holding turn locks (%s): stopping their turns", _reason(exc, ""))
        await self.drop(conn)
        return False

    async def drop(self, conn: Conn) -> None:
        """Forget a connection that failed (the next lock gets a new one); its locks are gone with it."""
        if conn is self._conn:
            self._conn = None
        with anyio.CancelScope(shield=True):
            await conn.close()

    async def _current(self) -> Conn:
        async with self._opening:
            if self._conn is None or self._conn.closed or self._conn.broken:
                self._conn = await psycopg.AsyncConnection.connect(
                    self._url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
                )
                self._answered_at = anyio.current_time()
            return self._conn

    async def close(self) -> None:
        if self._conn is not None:
            await self.drop(self._conn)


class PostgresStore:
    """The `SessionStore` on PostgreSQL. Construct with `await PostgresStore.open(url)`."""

    def __init__(
        self, url: str, owner: Conn, queries: AsyncConnectionPool[Conn], turns: AsyncConnectionPool[Conn], key: int
    ) -> None:
        self._url = url
        self._owner: Conn | None = owner
        self._queries = queries
        self._turns = turns
        self.owner_key = key
        self.instance_id = f"own_pg_{key:016x}"
        self._ended: dict[str, set[anyio.Event]] = {}
        """turn id -> the events of the `wait_ended` calls waiting for it."""
        self._leases: dict[str, _Lease] = {}
        """session id -> this store's hold of its turn lock (one at a time: turns of a session queue in-process)."""
        self._locks = _SharedLocks(url)
        self._shared_held: set[str] = set()
        """Sessions whose lock this store takes or holds on the shared lock connection."""
        self._histories = HistoryCache()
        """The parsed live histories of recently begun sessions (`begin_turn` only)."""

    @classmethod
    async def open(cls, url: str) -> PostgresStore:
        """Connect, migrate, take this instance's liveness lock, LISTEN; mark dead replicas' turns interrupted.

        Raises:
            StoreError: the database cannot be reached or used (the message shows the URL without secrets).
        """
        where = redact_url(url)
        key = secrets.randbits(63)
        owner: Conn | None = None
        pools: list[AsyncConnectionPool[Conn]] = []
        try:
            owner = await _connect_owner(url, key, migrate=True)
            async with owner.transaction():
                await db.interrupt_dead_owners(owner, key)
            for size, reset in ((QUERY_CONNECTIONS, None), (TURN_CONNECTIONS, _unlock_all)):
                pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
                    url, min_size=1, max_size=size, open=False, kwargs={"autocommit": True}, reset=reset
                )
                pools.append(pool)
                await pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except (psycopg.Error, psycopg_pool.PoolTimeout, OSError) as exc:
            await _discard(owner, pools)
            raise StoreError(f"cannot open the PostgreSQL store at {where}: {_reason(exc, url)}") from exc
        except BaseException:
            await _discard(owner, pools)
            raise
        logger.info("opened the session store at %s as instance %s", where, f"{key:016x}")
        return cls(url, owner, pools[0], pools[1], key)

    # --- running statements ------------------------------------------------------------

    async def _run(self, fn: Callable[[Conn], Awaitable[T]], *, transaction: bool = True, pipeline: bool = False) -> T:
        """`fn` in one transaction on a pooled connection (or, `transaction=False`, in autocommit: for a single
        statement); database failures as StoreError. `pipeline`: the transaction in psycopg's pipeline mode
        (`_pipelined`), for `fn`s that read first and then only write."""
        if self._owner is None:
            raise StoreError("the session store is closed")
        try:
            async with self._queries.connection() as conn:
                if not transaction:
                    return await fn(conn)
                if pipeline:
                    return await _pipelined(conn, fn)
                async with conn.transaction():
                    return await fn(conn)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise StoreError(f"session store: {_reason(exc, '')}") from exc
        except (UnicodeError, ValueError) as exc:  # text PostgreSQL cannot hold (NUL, a lone surrogate)
            if isinstance(exc, json.JSONDecodeError):
                raise StoreError(f"session store: {exc}") from exc
            raise StoreError(f"session store: cannot encode the record: {exc}") from exc

    # --- sessions -----------------------------------------------------------------------

    async def create_session(
        self, *, title: str, metadata: dict[str, Any], principal: str = LOCAL_PRINCIPAL
    ) -> SessionInfo:
        session_id, now, meta = new_id("ses"), utc_now(), json.dumps(metadata, ensure_ascii=False)

        async def run(conn: Conn) -> SessionInfo:
            await conn.execute(
                "INSERT INTO sessions (session_id, title, metadata, created_at, updated_at, principal)"
                " VALUES (%s, %s, %s, %s, %s, %s)",
                (session_id, db.text(title), meta, now, now, principal),
            )
            return SessionInfo(
                session_id=session_id,
                title=title,
                metadata=json.loads(meta),
                created_at=now,
                updated_at=now,
                turn_count=0,
            )

        return await self._run(run, transaction=False)  # one statement: one round trip

    async def get_session(self, session_id: str) -> SessionInfo:
        return await self._run(lambda conn: db.get_session(conn, session_id))

    async def session_owner(self, session_id: str) -> str:
        return await self._run(lambda conn: db.session_owner(conn, session_id))

    async def list_sessions(
        self, *, cursor: str | None, limit: int, principal: str = LOCAL_PRINCIPAL
    ) -> tuple[list[SessionInfo], str | None]:
        common.check_limit(limit)
        after = common.decode_cursor("sessions", cursor)

        async def run(conn: Conn) -> tuple[list[SessionInfo], str | None]:
            rows = await (
                await conn.execute(
                    f"SELECT {db.SESSION_COLUMNS} FROM sessions s WHERE s.principal = %s AND s.ordinal < %s"
                    " ORDER BY s.ordinal DESC LIMIT %s",
                    (principal, after if after is not None else 2**62, limit + 1),
                )
            ).fetchall()
            more = len(rows) > limit
            rows = rows[:limit]
            return [db.session_info(r) for r in rows], common.encode_cursor("sessions", rows[-1][0]) if more else None

        return await self._run(run)

    async def delete_session(self, session_id: str) -> None:
        async def run(conn: Conn) -> None:
            await db.require_session(conn, session_id, lock=True)
            tables = ("messages", "turns", "compactions", "approvals", "tasks", "questions", "turn_leases", "sessions")
            for table in tables:
                await conn.execute(f"DELETE FROM {table} WHERE session_id = %s", (session_id,))
            self._histories.forget(session_id)

        await self._run(run)

    # --- history ------------------------------------------------------------------------

    async def load_history(self, session_id: str) -> SessionHistory:
        return await self._run(lambda conn: _history(conn, session_id))

    async def all_messages(self, session_id: str) -> list[tuple[StoredMessage, bool]]:
        """Every stored message of the session, archived ones included, with its archived flag."""

        async def run(conn: Conn) -> list[tuple[StoredMessage, bool]]:
            await db.require_session(conn, session_id)
            return await db.stored_messages(conn, session_id)

        return await self._run(run)

    async def list_messages(
        self, session_id: str, *, cursor: str | None, limit: int
    ) -> tuple[list[tuple[StoredMessage, bool]], str | None]:
        """One page of every stored message (archived ones included, flagged), by seq; and the next cursor."""
        common.check_limit(limit)
        after = common.decode_cursor("messages", cursor) or 0

        async def run(conn: Conn) -> tuple[list[tuple[StoredMessage, bool]], str | None]:
            await db.require_session(conn, session_id)
            page = await db.stored_messages(conn, session_id, after=after, limit=limit + 1)
            more = len(page) > limit
            page = page[:limit]
            return page, common.encode_cursor("messages", page[-1][0].seq) if more else None

        return await self._run(run)

    async def _history_after(
        self, conn: Conn, session_id: str, summary: str | None, through: int, rows: list[tuple[Any, ...]]
    ) -> SessionHistory:
        """The live history from `LIVE_AFTER`'s rows, read after the session's row was locked (every writer of
        its messages locks it first, so the summary and the rows agree); a whole read when what this store
        remembers no longer holds."""
        check, after = db.live_after(rows)
        resume = self._histories.resume(session_id, summary=summary, live_prefix=check)
        if resume.after != through:  # changed since: read the whole live history
            whole = await conn.execute(db.LIVE_AFTER, {"session": session_id, "through": 0})
            _, after = db.live_after(await whole.fetchall())
            resume = FROM_START
        return self._histories.history(session_id, summary, resume, after)

    # --- turns --------------------------------------------------------------------------

    async def begin_turn(self, record: TurnRecord, *, stored: bool = False) -> SessionHistory:
        """Make the turn visible as `running`, owned by this instance, last among the session's turns (see
        `base`); the history it starts from.

        Running turns of the session left by dead replicas are marked `interrupted` first. Two round trips: the
        checks and the history read together (`db.WRITE_LOCK_BEGIN`), then the writes with the commit."""
        session_id = record.session_id

        async def run(conn: Conn) -> SessionHistory:
            through = self._histories.remembered_through(session_id)
            checks = await conn.execute(db.WRITE_LOCK_BEGIN, {"me": self.owner_key, "session": session_id})
            messages = await conn.execute(db.LIVE_AFTER, {"session": session_id, "through": through})
            row = await checks.fetchone()
            if row is None:
                self._histories.forget(session_id)
                raise SessionNotFound(session_id)
            summary, epoch, other_owners = row
            if not self._fenced_ok(session_id, epoch):
                raise TurnLockLost(session_id)
            history = await self._history_after(conn, session_id, summary, through, await messages.fetchall())
            if other_owners:  # some other replica's turn runs: is that replica alive?
                await db.interrupt_dead_owners(conn, self.owner_key, session_id)
            if stored:  # its own record, stored before it began, moves last (see `base`)
                await conn.execute(
                    "DELETE FROM turns WHERE session_id = %s AND turn_id = %s AND status = 'running'"
                    " AND owner_key = %s",
                    (session_id, record.turn_id, self.owner_key),
                )
            await conn.execute(db.BEGIN_WRITES, {**self._turn_row(record), "now": utc_now()})
            return history

        try:
            return await self._run(run, pipeline=True)
        except StoreError as exc:
            if isinstance(exc.__cause__, psycopg.errors.UniqueViolation):  # raised at the commit (pipeline)
                raise StoreError(f"session store: turn {record.turn_id!r} exists already") from exc.__cause__
            raise

    def _turn_row(self, record: TurnRecord) -> dict[str, Any]:
        return {
            "session": record.session_id,
            "turn": record.turn_id,
            "status": record.status,
            "record": common.dump(record),
            "owner": self.instance_id,
            "key": self.owner_key,
            "title": None if (title := common.first_title(record)) is None else db.text(title),
            "untitled": db.text(UNTITLED),
        }

    def _fencing_epoch(self, session_id: str) -> int | None:
        """The epoch a write of this store's to the session must find (see `_fenced_ok`): None when it holds no
        lock of the session (no check), -1 (no epoch is) when it held one and lost it."""
        lease = self._leases.get(session_id)
        if lease is None:
            return None
        return -1 if lease.lost else lease.epoch

    def _fenced_ok(self, session_id: str, epoch: int | None) -> bool:
        """The fencing check of every write a lock's holder makes to its session, on the epoch read (share-locked)
        in the write's transaction: False when this store held the session's turn lock and lost it; True when it
        holds it, or holds no lock of the session."""
        expected = self._fencing_epoch(session_id)
        return expected is None or epoch == expected

    async def finish_turn(self, record: TurnRecord, messages: list[Message]) -> bool:
        """Write the final record and append `messages` in one transaction; False if the session is gone.

        Raises:
            TurnLockLost: this store held the session's turn lock and lost it; only the turn's own record
                was written, as `failed` (a `running` record without messages, a turn queued behind the
                lock, is no write of the session and is not refused).
        """
        fenced = bool(messages) or record.status != "running"
        values = {
            **self._turn_row(record),
            "messages": [common.dump(m) for m in messages],
            "now": utc_now(),
            "epoch": self._fencing_epoch(record.session_id) if fenced else None,
            "channel": db.ENDED_CHANNEL,
        }
        # One autocommit statement: the function is its own transaction (`_pg_db._V5_TO_V6`).
        ended = await self._run(lambda conn: db.one(conn, db.FINISH_TURN, values), transaction=False)
        assert ended is not None
        if ended[0] == db.FINISH_FENCED:
            await self._run(lambda conn: self._store_stopped(conn, _lock_lost(record)))
            raise TurnLockLost(record.session_id)
        return ended[0] == db.FINISHED

    async def _store_stopped(self, conn: Conn, record: TurnRecord) -> None:
        """Write only the turn's own row (none of the session's history)."""
        await conn.execute(
            "INSERT INTO turns (session_id, turn_id, status, record, owner, owner_key)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (session_id, turn_id)"
            " DO UPDATE SET status = excluded.status, record = excluded.record",
            (record.session_id, record.turn_id, record.status, common.dump(record), self.instance_id, self.owner_key),
        )
        await conn.execute("SELECT pg_notify(%s, %s)", (db.ENDED_CHANNEL, record.turn_id))

    async def _holds_lease(self, conn: Conn, session_id: str) -> bool:
        """False when this store held the session's turn lock and lost it (the fencing check of every write
        the lock's holder makes to the session); True when it holds it, or holds no lock of the session."""
        lease = self._leases.get(session_id)
        if lease is None:
            return True
        return not lease.lost and await db.holds_lease(conn, session_id, lease.epoch)

    async def get_turn(self, session_id: str, turn_id: str) -> TurnRecord:
        return await self._run(lambda conn: self._turn(conn, session_id, turn_id))

    async def _turn(self, conn: Conn, session_id: str, turn_id: str) -> TurnRecord:
        """The turn's record; a running one whose owner is gone is marked `interrupted` first."""
        await db.require_session(conn, session_id)
        ordinal, status = await db.turn_row(conn, session_id, turn_id)
        if status == "running":
            await db.interrupt_dead_owners(conn, self.owner_key, session_id)
        row = await db.one(conn, "SELECT record FROM turns WHERE ordinal = %s", (ordinal,))
        assert row is not None
        return TurnRecord.model_validate(json.loads(row[0]))

    async def list_turns(
        self, session_id: str, *, cursor: str | None, limit: int
    ) -> tuple[list[TurnRecord], str | None]:
        common.check_limit(limit)
        after = common.decode_cursor("turns", cursor)

        async def run(conn: Conn) -> tuple[list[TurnRecord], str | None]:
            await db.require_session(conn, session_id)
            await db.interrupt_dead_owners(conn, self.owner_key, session_id)
            rows = await (
                await conn.execute(
                    "SELECT ordinal, record FROM turns WHERE session_id = %s AND ordinal > %s"
                    " ORDER BY ordinal LIMIT %s",
                    (session_id, after or 0, limit + 1),
                )
            ).fetchall()
            more = len(rows) > limit
            rows = rows[:limit]
            turns = [TurnRecord.model_validate(json.loads(record)) for _, record in rows]
            return turns, common.encode_cursor("turns", rows[-1][0]) if more else None

        return await self._run(run)

    async def find_turn(self, turn_id: str, *, principal: str) -> TurnRecord | None:
        """The turn with this id in one of `principal`'s sessions (the first begun, when forks copied it), or None;
        a running one whose owner is gone is marked `interrupted` first."""

        async def run(conn: Conn) -> TurnRecord | None:
            row = await db.one(
                conn,
                "SELECT t.session_id FROM turns t JOIN sessions s ON s.session_id = t.session_id"
                " WHERE t.turn_id = %s AND s.principal = %s ORDER BY t.ordinal LIMIT 1",
                (turn_id, principal),
            )
            return None if row is None else await self._turn(conn, row[0], turn_id)

        return await self._run(run)

    # --- across replicas: turn order and cancellation ------------------------------------

    @asynccontextmanager
    async def hold_turn(
        self, session_id: str, *, deadline: float = math.inf, on_busy: Callable[[], None] | None = None
    ) -> AsyncGenerator[bool]:
        """Hold the session's turn lock (shared by every replica) for the block; yields False, not
        holding it, when `deadline` (anyio's clock) passed while waiting for it; `on_busy` is told when
        another holds it (before the wait).

        A free lock is taken on the shared lock connection (`_SharedLocks`); a busy one is waited for on a
        pooled connection of its own, which then holds it (as does a session this store holds already: a
        connection's advisory locks are reentrant, so the shared one cannot exclude itself).

        Raises:
            StoreError: no connection could be had, or the database failed.
        """
        shared: Conn | None = None
        pooled: Conn | None = None
        lease: _Lease | None = None
        try:
            with anyio.CancelScope(deadline=deadline):
                try:
                    if session_id not in self._shared_held:
                        self._shared_held.add(session_id)
                        try:
                            with anyio.CancelScope(shield=True):  # a lock taken must be known, to be released
                                shared = await self._locks.try_lock(session_id)
                        finally:
                            if shared is None:
                                self._shared_held.discard(session_id)
                    if shared is None:
                        pooled = await self._turns.getconn()
                        await _lock_session(pooled, session_id, on_busy)
                    lock_conn = shared if shared is not None else pooled
                    assert lock_conn is not None
                    lease = _Lease(lock_conn, await self._claim(session_id), shared=shared is not None)
                except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
                    raise StoreError(f"session store: cannot take the turn lock: {_reason(exc, '')}") from exc
            if lease is None:
                yield False
                return
            self._leases[session_id] = lease
            async with self._watching(lease, session_id):
                yield True
        finally:
            if lease is not None:
                self._leases.pop(session_id, None)
            with anyio.CancelScope(shield=True):
                if shared is not None:
                    await self._release_shared(shared, session_id, lease)
                    self._shared_held.discard(session_id)
                else:
                    if lease is not None:
                        await self._release(lease, session_id)
                    if pooled is not None:
                        await self._turns.putconn(pooled)  # its reset drops the lock (a broken one is closed)

    async def _claim(self, session_id: str) -> int:
        """The session's lease (one autocommit statement when it is free); waits (at most `LEASE_DRAIN_S`) while
        a live replica that lost this lock still holds it."""
        give_up = anyio.current_time() + LEASE_DRAIN_S
        while True:
            take_over = anyio.current_time() >= give_up

            async def claim(conn: Conn, take_over: bool = take_over) -> int | None:
                return await db.claim_lease(conn, session_id, self.owner_key, take_over=take_over)

            epoch = await self._run(claim, transaction=False)
            if epoch is not None:
                return epoch
            await anyio.sleep(LEASE_POLL_S)

    async def _release_shared(self, conn: Conn, session_id: str, lease: _Lease | None) -> None:
        """Give the lease (if any) and the lock on the shared connection up, in one statement; when that
        connection has failed, its locks are gone with it, and the lease is given up on a pooled one."""
        epoch = -1 if lease is None or lease.lost else lease.epoch
        try:
            await conn.execute(db.RELEASE_AND_UNLOCK, {"session": session_id, "epoch": epoch, "space": db.LOCK_SPACE})
            self._locks.answered(conn)
            return
        except psycopg.Error:
            await self._locks.drop(conn)
        if lease is not None:
            lease.lost = True
            await self._release(lease, session_id)

    async def _release(self, lease: _Lease, session_id: str) -> None:
        """Give the lease up: on the lock's connection, or (it is lost) on a pooled one."""
        if not lease.lost and not lease.conn.broken:
            try:
                await db.release_lease(lease.conn, session_id, lease.epoch)
                return
            except psycopg.Error:
                pass  # lost just now: on a pooled connection, then
        try:
            await self._run(lambda conn: db.release_lease(conn, session_id, lease.epoch))
        except StoreError as exc:  # the next holder takes it over after LEASE_DRAIN_S
            logger.warning("could not release the turn lease of session %s: %s", session_id, exc.message)

    @asynccontextmanager
    async def _watching(self, lease: _Lease, session_id: str) -> AsyncGenerator[None]:
        """Run the block while the lock's connection lives; once it is found dead, cancel the block and
        raise `TurnLockLost` (unless the block raised something else meanwhile)."""
        block = anyio.CancelScope()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_watch_lock, lease, block, self._locks)
                try:
                    with block:
                        yield
                finally:
                    tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:  # the task group wraps what the block raised
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from group.exceptions[0].__cause__
            raise
        if block.cancelled_caught:
            raise TurnLockLost(session_id)

    async def request_cancel(self, turn_id: str) -> None:
        """Ask whichever replica runs the turn to cancel it (NOTIFY; the runtime there acts on it)."""

        async def run(conn: Conn) -> None:
            await conn.execute("SELECT pg_notify(%s, %s)", (db.CANCEL_CHANNEL, turn_id))

        await self._run(run)

    async def wait_ended(self, session_id: str, turn_id: str, timeout_s: float) -> TurnRecord:
        """The turn's record once it is no longer `running`, or the running one after `timeout_s`.

        Woken by the `finish_turn` NOTIFY while `serve_notifications` runs; without it, this waits out
        `timeout_s`."""
        woken = anyio.Event()
        try:
            with anyio.move_on_after(timeout_s):
                while True:
                    self._ended.setdefault(turn_id, set()).add(woken)  # before reading: no NOTIFY is missed
                    record = await self.get_turn(session_id, turn_id)
                    if record.status != "running":
                        return record
                    await woken.wait()
                    self._ended[turn_id].discard(woken)
                    woken = anyio.Event()
            return await self.get_turn(session_id, turn_id)
        finally:
            waiters = self._ended.get(turn_id, set())
            waiters.discard(woken)
            if not waiters:
                self._ended.pop(turn_id, None)

    async def serve_notifications(self, on_cancel: Callable[[str], None]) -> None:
        """Until cancelled (or closed): pass every cancel request (a turn id) to `on_cancel`, wake `wait_ended`.

        A lost owner connection (the database restarted, the network failed) is connected again, with this
        instance's liveness lock and LISTENs, retrying with backoff; until then the other replicas see this
        one's running turns as dead (and mark them `interrupted`; a turn that ends here still stores its
        final record)."""
        while (owner := self._owner) is not None:
            try:
                async for notify in owner.notifies():
                    if notify.channel == db.CANCEL_CHANNEL:
                        on_cancel(notify.payload)
                    else:
                        self._wake(notify.payload)
            except psycopg.Error as exc:
                logger.error("lost the PostgreSQL owner connection (%s): connecting again", _reason(exc, self._url))
                await self._reconnect_owner(owner)

    def _wake(self, turn_id: str | None = None) -> None:
        """Wake the `wait_ended` calls waiting for `turn_id` (None: all of them, to read their turn again)."""
        for waiting, events in self._ended.items():
            if turn_id is None or waiting == turn_id:
                for woken in events:
                    woken.set()

    async def _reconnect_owner(self, lost: Conn) -> None:
        delay = 0.0
        while self._owner is lost:
            await anyio.sleep(delay)  # backoff between failed attempts; the first one at once
            try:
                fresh = await _connect_owner(self._url, self.owner_key, migrate=False)
            except psycopg.Error as exc:
                delay = min(RECONNECT_MAX_S, max(2 * delay, 0.5))
                logger.warning("cannot reach PostgreSQL (%s): trying again in %.1f s", _reason(exc, self._url), delay)
                continue
            if self._owner is not lost:  # closed meanwhile
                await fresh.close()
                return
            self._owner = fresh
            with anyio.CancelScope(shield=True):
                await lost.close()
            logger.info("connected the owner connection again")
            self._wake()  # a turn may have ended while no NOTIFY could arrive

    async def share_task(self, task: SharedTask) -> None:
        async def run(conn: Conn) -> None:
            await conn.execute(
                "INSERT INTO tasks (task_id, turn_id, session_id, detail, created_at, principal)"
                " VALUES (%s, %s, %s, %s, %s, %s)",
                (task.task_id, task.turn_id, task.session_id, task.detail, task.created_at, task.principal),
            )

        await self._run(run)

    async def shared_task(self, task_id: str) -> SharedTask | None:
        async def run(conn: Conn) -> SharedTask | None:
            sql = "SELECT task_id, turn_id, session_id, detail, created_at, principal FROM tasks WHERE task_id = %s"
            row = await db.one(conn, sql, (task_id,))
            return None if row is None else SharedTask(*row)

        return await self._run(run)

    # --- compactions, approvals and forks -------------------------------------------------

    async def save_compaction(
        self, session_id: str, record: CompactionRecord, *, archive_through_seq: int, live_from_seq: int
    ) -> None:
        """Store the record; unless a dry run, archive `seq <= archive_through_seq` and set the summary.

        The session's row lock makes the check and the write atomic against other replicas.

        Raises:
            CompactionConflict: (not for a dry run) a message with `seq >= live_from_seq` is archived already.
        """

        async def run(conn: Conn) -> None:
            await db.require_session(conn, session_id, lock=True)
            if not await self._holds_lease(conn, session_id):
                raise TurnLockLost(session_id)
            if not record.dry_run and await db.archived_since(conn, session_id, live_from_seq):
                raise CompactionConflict(session_id)
            await conn.execute(
                "INSERT INTO compactions (session_id, record, archive_through_seq, head_seq) VALUES (%s, %s, %s, %s)",
                (session_id, common.dump(record), archive_through_seq, await db.head_seq(conn, session_id)),
            )
            if not record.dry_run:
                await conn.execute(
                    "UPDATE messages SET archived = true WHERE session_id = %s AND seq <= %s",
                    (session_id, archive_through_seq),
                )
                await conn.execute(
                    "UPDATE sessions SET summary = %s WHERE session_id = %s", (record.summary, session_id)
                )
            await db.touch(conn, session_id)

        await self._run(run)

    async def list_compactions(self, session_id: str) -> list[CompactionRecord]:
        async def run(conn: Conn) -> list[CompactionRecord]:
            await db.require_session(conn, session_id)
            rows = await (
                await conn.execute(
                    "SELECT record FROM compactions WHERE session_id = %s ORDER BY ordinal", (session_id,)
                )
            ).fetchall()
            return [CompactionRecord.model_validate(json.loads(row[0])) for row in rows]

        return await self._run(run)

    async def remember_approval(self, session_id: str, tool: str) -> None:
        async def run(conn: Conn) -> None:
            await db.require_session(conn, session_id)
            await conn.execute(
                "INSERT INTO approvals (session_id, tool, created_at) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                (session_id, tool, utc_now()),
            )

        await self._run(run)

    async def approved_tools(self, session_id: str) -> frozenset[str]:
        async def run(conn: Conn) -> frozenset[str]:
            await db.require_session(conn, session_id)
            rows = await (
                await conn.execute("SELECT tool FROM approvals WHERE session_id = %s", (session_id,))
            ).fetchall()
            return frozenset(row[0] for row in rows)

        return await self._run(run)

    async def fork_session(self, session_id: str, *, at_turn: str | None, title: str | None) -> SessionInfo:
        """A new session holding the finished turns up to `at_turn` (or all) and their history; see `base`."""
        new_session = new_id("ses")
        return await self._run(lambda conn: _fork(conn, session_id, new_session, at_turn, title))

    # --- the web view: running turns' progress, pending approvals ----------------------------

    async def save_progress(self, record: TurnRecord) -> None:
        async def run(conn: Conn) -> None:
            await conn.execute(
                "UPDATE turns SET record = %s WHERE session_id = %s AND turn_id = %s AND status = 'running'",
                (common.dump(record), record.session_id, record.turn_id),
            )

        await self._run(run)

    async def post_question(self, question: PendingApproval) -> None:
        async def run(conn: Conn) -> None:
            await conn.execute("DELETE FROM questions WHERE expires_at <= %s", (utc_now(),))
            await conn.execute(
                "INSERT INTO questions (question_id, session_id, principal, expires_at, question)"
                " VALUES (%s, %s, %s, %s, %s)",
                (
                    question.question_id,
                    question.session_id,
                    question.principal,
                    question.expires_at,
                    common.dump(question),
                ),
            )

        await self._run(run)

    async def pending_questions(self, principal: str) -> list[PendingApproval]:
        async def run(conn: Conn) -> list[PendingApproval]:
            rows = await (
                await conn.execute(
                    "SELECT question FROM questions WHERE principal = %s AND answer IS NULL AND expires_at > %s"
                    " ORDER BY expires_at LIMIT %s",
                    (principal, utc_now(), MAX_PENDING_LISTED),
                )
            ).fetchall()
            return [PendingApproval.model_validate(json.loads(row[0])) for row in rows]

        return await self._run(run)

    async def answer_question(self, question_id: str, choice: str, *, principal: str) -> bool:
        async def run(conn: Conn) -> bool:
            cursor = await conn.execute(
                "UPDATE questions SET answer = %s WHERE question_id = %s AND principal = %s AND answer IS NULL"
                " AND expires_at > %s",
                (choice, question_id, principal, utc_now()),
            )
            return cursor.rowcount == 1

        return await self._run(run)

    async def question_answer(self, question_id: str) -> str | None:
        async def run(conn: Conn) -> str | None:
            row = await db.one(conn, "SELECT answer FROM questions WHERE question_id = %s", (question_id,))
            return None if row is None else row[0]

        return await self._run(run)

    async def drop_question(self, question_id: str) -> None:
        async def run(conn: Conn) -> None:
            await conn.execute("DELETE FROM questions WHERE question_id = %s", (question_id,))

        await self._run(run)

    async def close(self) -> None:
        """Close the pools and the owner connection (which releases this instance's liveness lock). Idempotent."""
        owner, self._owner = self._owner, None
        if owner is not None:
            with anyio.CancelScope(shield=True):
                await self._locks.close()
                await _discard(owner, [self._queries, self._turns])


async def _pipelined(conn: Conn, fn: Callable[[Conn], Awaitable[T]]) -> T:
    """`fn` in one transaction in pipeline mode: statements whose results are not read yet go out together, so
    `BEGIN` travels with the first statements, and the writes after the last read travel with `COMMIT` (two
    round trips for a read-then-write transaction instead of one per statement). The block is explicit
    (`BEGIN`/`COMMIT` on the autocommit connection), so it holds whatever psycopg syncs in between; errors are
    raised when a result is read or at the end, and roll the transaction back."""
    try:
        async with conn.pipeline():
            await conn.execute("BEGIN")
            result = await fn(conn)
            await conn.execute("COMMIT")
        return result
    except BaseException:
        with anyio.CancelScope(shield=True):
            if not conn.broken and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                await conn.execute("ROLLBACK")
        raise


async def _connect_owner(url: str, key: int, *, migrate: bool) -> Conn:
    """The owner connection: (the schema migrated,) this instance's liveness lock held, LISTENing."""
    owner = await psycopg.AsyncConnection.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    try:
        if migrate:
            await db.migrate(owner)
        await owner.execute("SELECT pg_advisory_lock(%s)", (key,))
        for channel in (db.CANCEL_CHANNEL, db.ENDED_CHANNEL):
            await owner.execute(f"LISTEN {channel}")
    except BaseException:
        await owner.close()
        raise
    return owner


async def _lock_session(conn: Conn, session_id: str, on_busy: Callable[[], None] | None) -> None:
    """Take the session's turn lock on `conn`: at once when it is free, else (telling `on_busy`) when it is."""
    key = (db.LOCK_SPACE, session_id)
    row = await (await conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", key)).fetchone()
    if row is not None and row[0]:
        return
    if on_busy is not None:
        on_busy()
    await conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", key)


async def _watch_lock(lease: _Lease, block: anyio.CancelScope, shared: _SharedLocks) -> None:
    """Check the lock's connection every `LOCK_CHECK_S`; when it is gone, mark the lease lost and cancel
    `block` (another replica may take the lock, and will wait for the lease, at once)."""
    while True:
        await anyio.sleep(LOCK_CHECK_S)
        if lease.shared:
            alive = await shared.alive(lease.conn)
        else:
            try:
                with anyio.fail_after(LOCK_CHECK_TIMEOUT_S):
                    await lease.conn.execute("SELECT 1")
                alive = True
            except (psycopg.Error, TimeoutError) as exc:
                logger.error("lost the connection holding a turn lock (%s): stopping its turn", _reason(exc, ""))
                alive = False
        if not alive:
            lease.lost = True
            block.cancel()
            return


def _lock_lost(record: TurnRecord) -> TurnRecord:
    """The record of a turn stopped because its process lost the session's turn lock."""
    error = ErrorInfo(type=STORE_ERROR, message=TurnLockLost(record.session_id).message)
    return record.model_copy(
        update={"status": "failed", "finished_at": record.finished_at or utc_now(), "error": error}
    )


async def _unlock_all(conn: Conn) -> None:
    """The turn pool's reset: a connection goes back to the pool holding no turn lock."""
    await conn.execute("SELECT pg_advisory_unlock_all()")


async def _discard(owner: Conn | None, pools: list[AsyncConnectionPool[Conn]]) -> None:
    for pool in pools:
        await pool.close()
    if owner is not None:
        await owner.close()


def _reason(exc: BaseException, url: str) -> str:
    """The error's first line, with the URL (and any other URL) stripped of its secrets."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if url:
        text = text.replace(url, redact_url(url))
    return text


# --- history and forks ----------------------------------------------------------------------

_FORKED_TURNS = (
    "SELECT turn_id FROM turns WHERE session_id = %(source)s AND ordinal <= %(last)s AND status <> 'running'"
)
_FORKED_MESSAGE = f"(turn_id IN ({_FORKED_TURNS}) OR (turn_id IS NULL AND seq <= %(cut)s))"
"""A message the fork copies: one of a copied turn's, or one without a turn from before the cut."""


async def _history(conn: Conn, session_id: str) -> SessionHistory:
    row = await db.one(conn, "SELECT summary FROM sessions WHERE session_id = %s", (session_id,))
    if row is None:
        raise SessionNotFound(session_id)
    messages = await db.stored_messages(conn, session_id, live_only=True)
    return SessionHistory(summary=row[0], messages=[m for m, _ in messages])


async def _fork(conn: Conn, source: str, target: str, at_turn: str | None, title: str | None) -> SessionInfo:
    await db.require_session(conn, source, lock=True)
    old = await db.get_session(conn, source)
    where: dict[str, Any] = {
        "source": source,
        "last": 2**62 if at_turn is None else await _fork_point(conn, source, at_turn),
    }
    row = await db.one(
        conn,
        f"SELECT coalesce(max(seq), 0) FROM messages WHERE session_id = %(source)s AND turn_id IN ({_FORKED_TURNS})",
        where,
    )
    where["cut"] = row[0] if row else 0
    # Compactions are kept only while everything they could have archived is in the fork: up to
    # the first message the fork leaves out (a later-started turn that finished first).
    row = await db.one(
        conn,
        "SELECT coalesce(min(seq), %(cut)s + 1) - 1 FROM messages"
        f" WHERE session_id = %(source)s AND seq <= %(cut)s AND NOT {_FORKED_MESSAGE}",
        where,
    )
    clean = row[0] if row else 0
    compactions = await (
        await conn.execute(
            "SELECT record, archive_through_seq, head_seq FROM compactions"
            " WHERE session_id = %s AND head_seq <= %s ORDER BY ordinal",
            (source, clean),
        )
    ).fetchall()
    summary, archived_through = None, 0
    for record, through, _ in compactions:
        compaction = CompactionRecord.model_validate(json.loads(record))
        if not compaction.dry_run:
            summary, archived_through = compaction.summary, through
    now = utc_now()
    await conn.execute(
        "INSERT INTO sessions (session_id, title, metadata, created_at, updated_at, summary, principal)"
        " SELECT %s, %s, %s, %s, %s, %s, principal FROM sessions WHERE session_id = %s",
        (target, db.text(common.fork_title(old.title, title)), json.dumps(old.metadata), now, now, summary, source),
    )
    await conn.execute(
        "INSERT INTO messages (session_id, seq, turn_id, message, archived)"
        " SELECT %(target)s, seq, turn_id, message, seq <= %(archived)s FROM messages"
        f" WHERE session_id = %(source)s AND {_FORKED_MESSAGE}",
        {**where, "target": target, "archived": archived_through},
    )
    async with conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO compactions (session_id, record, archive_through_seq, head_seq) VALUES (%s, %s, %s, %s)",
            [(target, *r) for r in compactions],
        )
    await _copy_turns(conn, source, target, where["last"])
    return await db.get_session(conn, target)


async def _fork_point(conn: Conn, session_id: str, turn_id: str) -> int:
    """The ordinal of the turn to fork after; InvalidArgument while it is still running."""
    ordinal, status = await db.turn_row(conn, session_id, turn_id)
    if status == "running":
        raise InvalidArgument(common.fork_running_message(turn_id))
    return ordinal


async def _copy_turns(conn: Conn, source: str, target: str, last_turn: int) -> None:
    rows = await (
        await conn.execute(
            "SELECT record, owner, owner_key FROM turns WHERE session_id = %s AND ordinal <= %s AND status <> 'running'"
            " ORDER BY ordinal",
            (source, last_turn),
        )
    ).fetchall()
    for record, owner, owner_key in rows:
        copy = TurnRecord.model_validate(json.loads(record)).model_copy(update={"session_id": target})
        await conn.execute(
            "INSERT INTO turns (session_id, turn_id, status, record, owner, owner_key) VALUES (%s, %s, %s, %s, %s, %s)",
            (target, copy.turn_id, copy.status, common.dump(copy), owner, owner_key),
        )
