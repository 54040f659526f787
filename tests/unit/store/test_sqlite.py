"""SqliteStore beyond the shared contract: durability, crash recovery, several processes on one db."""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from agent_server.errors import StoreError
from agent_server.store import _sqlite_db
from agent_server.store._common import INTERRUPTED_MESSAGE
from agent_server.store._sqlite_db import SCHEMA_VERSION
from agent_server.store._turn_locks import BYTE_LOCKS, TurnLockFiles
from agent_server.store.sqlite import SqliteStore
from agent_server.types import Message, TurnRecord, new_id, utc_now
from tests.unit.store.helpers import completed

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[3]
CHILD_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}

# argv: state dir, session id. Begins a turn, then dies without closing anything.
DYING_CHILD = textwrap.dedent(
    """
    import os, sys, anyio
    from pathlib import Path
    from agent_server.store.sqlite import SqliteStore
    from agent_server.types import TurnRecord, utc_now

    async def main():
        store = await SqliteStore.open(Path(sys.argv[1]))
        await store.begin_turn(TurnRecord(
            turn_id="turn_orphan", session_id=sys.argv[2], trace_id="tr", status="running",
            prompt="p", started_at=utc_now()))
        os._exit(0)

    anyio.run(main)
    """
)

# argv: state dir, session id, tag. Says "ready", waits for a line on stdin, then writes 50 turns.
WRITER_CHILD = textwrap.dedent(
    """
    import sys, anyio
    from pathlib import Path
    from agent_server.store.sqlite import SqliteStore
    from agent_server.types import Message, TurnRecord, utc_now

    async def main():
        state, session_id, tag = sys.argv[1:4]
        store = await SqliteStore.open(Path(state))
        sys.stdout.write("ready\\n")
        sys.stdout.flush()
        sys.stdin.readline()
        for i in range(50):
            record = TurnRecord(turn_id=f"{tag}_{i}", session_id=session_id, trace_id="tr",
                                status="running", prompt=f"{tag} {i}", started_at=utc_now())
            await store.begin_turn(record)
            done = record.model_copy(update={"status": "completed", "finished_at": utc_now()})
            messages = [Message(role="user", content=f"{tag} {i}"), Message(role="assistant", content="ok")]
            assert await store.finish_turn(done, messages)
        await store.close()

    anyio.run(main)
    """
)


def running(session_id: str) -> TurnRecord:
    return TurnRecord(
        turn_id=new_id("turn"),
        session_id=session_id,
        trace_id="tr",
        status="running",
        prompt="p",
        started_at=utc_now(),
    )


async def new_session(state: Path) -> str:
    store = await SqliteStore.open(state)
    try:
        return (await store.create_session(title="s", metadata={})).session_id
    finally:
        await store.close()


async def test_reopening_shows_the_same_data(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path)
    session = await store.create_session(title="kept", metadata={"a": 1})
    record = running(session.session_id)
    await store.begin_turn(record)
    done = record.model_copy(update={"status": "completed", "final_text": "hi", "finished_at": utc_now()})
    await store.finish_turn(done, [Message(role="user", content="q"), Message(role="assistant", content="hi")])
    before = (
        await store.get_session(session.session_id),
        await store.all_messages(session.session_id),
        await store.load_history(session.session_id),
    )
    await store.close()

    reopened = await SqliteStore.open(tmp_path)
    try:
        assert await reopened.get_turn(session.session_id, record.turn_id) == done
        after = (
            await reopened.get_session(session.session_id),
            await reopened.all_messages(session.session_id),
            await reopened.load_history(session.session_id),
        )
        assert after == before
    finally:
        await reopened.close()


async def test_database_is_in_wal_mode_with_schema_version(tmp_path: Path) -> None:
    await (await SqliteStore.open(tmp_path)).close()
    with sqlite3.connect(tmp_path / "state.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    await (await SqliteStore.open(tmp_path)).close()
    conn = sqlite3.connect(tmp_path / "state.db")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer"):
        await SqliteStore.open(tmp_path)
    assert list((tmp_path / "owners").iterdir()) == []


async def test_a_newer_schema_is_refused_before_the_file_is_changed(tmp_path: Path) -> None:
    """A newer agent-server's database in rollback-journal mode stays exactly as it was (no WAL switch)."""
    db = tmp_path / "state.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE future (x)")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = db.read_bytes()
    with pytest.raises(StoreError, match="newer"):
        await SqliteStore.open(tmp_path)
    assert db.read_bytes() == before
    assert not (tmp_path / "state.db-wal").exists()
    with contextlib.closing(sqlite3.connect(db)) as check:
        assert check.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


async def test_a_closed_store_raises_store_error(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path)
    await store.close()
    await store.close()
    with pytest.raises(StoreError):
        await store.list_sessions(cursor=None, limit=5)


async def test_turn_of_a_dead_process_is_interrupted_at_next_open(tmp_path: Path) -> None:
    session_id = await new_session(tmp_path)
    with anyio.fail_after(10):
        await anyio.run_process([sys.executable, "-c", DYING_CHILD, str(tmp_path), session_id], env=CHILD_ENV)
    assert len(list((tmp_path / "owners").glob("*.lock"))) == 1  # the dead child's

    store = await SqliteStore.open(tmp_path)
    try:
        turn = await store.get_turn(session_id, "turn_orphan")
        assert turn.status == "interrupted"
        assert turn.finished_at is not None
        assert turn.error is not None
        assert (turn.error.type, turn.error.message) == ("interrupted", INTERRUPTED_MESSAGE)
        assert [p.name for p in (tmp_path / "owners").iterdir()] == [f"{store.instance_id}.lock"]
    finally:
        await store.close()


async def test_turn_of_a_live_instance_is_not_interrupted(tmp_path: Path) -> None:
    session_id = await new_session(tmp_path)
    live = await SqliteStore.open(tmp_path)
    record = running(session_id)
    await live.begin_turn(record)

    other = await SqliteStore.open(tmp_path)
    try:
        assert (await other.get_turn(session_id, record.turn_id)).status == "running"
        await live.close()  # its owner is gone now, with the turn still running
        later = await SqliteStore.open(tmp_path)
        assert (await later.get_turn(session_id, record.turn_id)).status == "interrupted"
        await later.close()
    finally:
        await other.close()
        await live.close()


async def test_finished_turns_are_left_alone(tmp_path: Path) -> None:
    session_id = await new_session(tmp_path)
    store = await SqliteStore.open(tmp_path)
    record = running(session_id)
    await store.begin_turn(record)
    done = record.model_copy(update={"status": "completed", "finished_at": utc_now()})
    await store.finish_turn(done, [])
    await store.close()
    store = await SqliteStore.open(tmp_path)
    try:
        assert await store.get_turn(session_id, record.turn_id) == done
    finally:
        await store.close()


async def read_line(process: anyio.abc.Process) -> bytes:
    assert process.stdout is not None
    buffer = b""
    while not buffer.endswith(b"\n"):
        buffer += await process.stdout.receive()
    return buffer


async def run_writers(state: Path, session_id: str, logs: list[Path]) -> list[int | None]:
    """Start one WRITER_CHILD per log file, let them all go at once, and return their exit codes."""
    async with contextlib.AsyncExitStack() as stack:
        writers: list[anyio.abc.Process] = []
        for i, log in enumerate(logs):
            stderr = stack.enter_context(log.open("wb"))
            command = [sys.executable, "-c", WRITER_CHILD, str(state), session_id, f"w{i}"]
            writer = await anyio.open_process(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=CHILD_ENV
            )
            writers.append(await stack.enter_async_context(writer))
        for writer in writers:
            assert await read_line(writer) == b"ready\n", [log.read_text() for log in logs]
        for writer in writers:
            assert writer.stdin is not None
            await writer.stdin.send(b"go\n")
        return [await writer.wait() for writer in writers]


async def test_two_processes_write_concurrently(tmp_path: Path) -> None:
    session_id = await new_session(tmp_path)
    logs = [tmp_path / f"writer{i}.log" for i in range(2)]
    with anyio.fail_after(14):
        codes = await run_writers(tmp_path, session_id, logs)
    assert codes == [0, 0], [log.read_text() for log in logs]

    store = await SqliteStore.open(tmp_path)
    try:
        turns, cursor = await store.list_turns(session_id, cursor=None, limit=1000)
        assert cursor is None
        assert sorted(t.turn_id for t in turns) == sorted(f"w{w}_{i}" for w in range(2) for i in range(50))
        assert {t.status for t in turns} == {"completed"}
        messages = await store.all_messages(session_id)
        assert [m.seq for m, _ in messages] == list(range(1, 201))
        for user, answer in zip(messages[::2], messages[1::2], strict=True):
            assert user[0].turn_id == answer[0].turn_id  # a turn's messages are contiguous
    finally:
        await store.close()


async def test_a_version_1_store_forgets_its_stored_active_session(tmp_path: Path) -> None:
    """Version 1 kept one active session for every process; version 2 drops it (current sessions are per connection)."""
    conn = sqlite3.connect(tmp_path / "state.db")
    conn.executescript(_sqlite_db._SCHEMA_V1)  # pyright: ignore[reportPrivateUsage]
    conn.execute(
        "INSERT INTO sessions (session_id, title, metadata, created_at, updated_at)"
        " VALUES ('ses_1', 't', '{}', 'x', 'x')"
    )
    conn.execute("INSERT INTO meta (key, value) VALUES ('active', 'ses_1')")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    store = await SqliteStore.open(tmp_path)
    try:
        (session,), _ = await store.list_sessions(cursor=None, limit=5)
    finally:
        await store.close()
    conn = sqlite3.connect(tmp_path / "state.db")
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == _sqlite_db.SCHEMA_VERSION
        assert conn.execute("SELECT count(*) FROM meta WHERE key = 'active'").fetchone()[0] == 0
    finally:
        conn.close()
    assert (session.session_id, session.active) == ("ses_1", False)


async def test_a_version_2_store_gains_remembered_approvals_that_survive_reopening(tmp_path: Path) -> None:
    """Version 3 adds the `approvals` table; a version 2 database keeps its sessions and can remember approvals."""
    conn = sqlite3.connect(tmp_path / "state.db")
    conn.executescript(_sqlite_db._SCHEMA_V1 + _sqlite_db._V1_TO_V2)  # pyright: ignore[reportPrivateUsage]
    conn.execute(
        "INSERT INTO sessions (session_id, title, metadata, created_at, updated_at)"
        " VALUES ('ses_1', 't', '{}', 'x', 'x')"
    )
    conn.execute("PRAGMA user_version = 2")
    conn.commit()
    conn.close()
    store = await SqliteStore.open(tmp_path)
    try:
        assert await store.approved_tools("ses_1") == frozenset()
        await store.remember_approval("ses_1", "write_file")
    finally:
        await store.close()
    store = await SqliteStore.open(tmp_path)
    try:
        assert await store.approved_tools("ses_1") == {"write_file"}
    finally:
        await store.close()
    conn = sqlite3.connect(tmp_path / "state.db")
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == _sqlite_db.SCHEMA_VERSION  # migrated to the latest
    finally:
        conn.close()


async def test_a_state_dir_that_is_a_file_is_a_readable_store_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    for state in (tmp_path / "file", tmp_path / "file" / "below"):
        with pytest.raises(StoreError, match="is a file, not a directory") as caught:
            await SqliteStore.open(state)
        assert "Errno" not in caught.value.message


async def test_a_read_only_state_dir_is_a_readable_store_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The tests may run as root, for whom permissions do not apply: the OS refusal is simulated.
    def refuse(path: str, *args: object, **kwargs: object) -> int:
        raise PermissionError(errno.EACCES, "Permission denied", path)

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(StoreError, match="the directory is not writable") as caught:
        await SqliteStore.open(tmp_path / "state")
    assert "Errno" not in caught.value.message


async def test_a_record_nested_too_deep_is_a_store_error_and_writes_nothing(tmp_path: Path) -> None:
    from agent_server.types import AssistantTurn, ToolCall

    deep: dict[str, object] = {}
    inner = deep
    for _ in range(500):
        inner["a"] = {}
        inner = inner["a"]  # pyright: ignore[reportAssignmentType]
    session_id = await new_session(tmp_path)
    store = await SqliteStore.open(tmp_path)
    try:
        record = running(session_id)
        await store.begin_turn(record)
        call = ToolCall(id="c", name="t", arguments=deep)
        done = record.model_copy(
            update={
                "status": "completed",
                "assistant_turns": [AssistantTurn(phase="initial", text="", tool_calls=[call])],
            }
        )
        with pytest.raises(StoreError, match="cannot serialise"):
            await store.finish_turn(done, [Message(role="user", content="p")])
        assert (await store.get_turn(session_id, record.turn_id)).status == "running"
        assert await store.all_messages(session_id) == []
    finally:
        await store.close()


async def test_a_version_3_store_gains_the_live_message_index_and_a_turns_start_reads_through_it(
    tmp_path: Path,
) -> None:
    """Version 4 indexes live messages; the live read must use it, not walk the session's archived rows."""
    conn = sqlite3.connect(tmp_path / "state.db")
    conn.executescript(
        _sqlite_db._SCHEMA_V1 + _sqlite_db._V1_TO_V2 + _sqlite_db._V2_TO_V3  # pyright: ignore[reportPrivateUsage]
    )
    conn.execute(
        "INSERT INTO sessions (session_id, title, metadata, created_at, updated_at, summary)"
        " VALUES ('ses_1', 't', '{}', 'x', 'x', 'earlier')"
    )
    message = Message(role="user", content="hi").model_dump_json()
    rows = [("ses_1", seq, None, message, int(seq <= 95)) for seq in range(1, 101)]
    conn.executemany("INSERT INTO messages (session_id, seq, turn_id, message, archived) VALUES (?, ?, ?, ?, ?)", rows)
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    store = await SqliteStore.open(tmp_path)
    try:
        history = await store.load_history("ses_1")
    finally:
        await store.close()
    assert (history.summary, [m.seq for m in history.messages]) == ("earlier", [96, 97, 98, 99, 100])
    conn = sqlite3.connect(tmp_path / "state.db")
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT seq FROM messages INDEXED BY messages_live"
            " WHERE session_id = 'ses_1' AND seq > 0 AND archived = 0"
        ).fetchall()
    finally:
        conn.close()
    assert "messages_live" in str(plan)


async def test_a_version_4_store_gives_its_sessions_to_the_local_principal_and_finds_turns_by_id(
    tmp_path: Path,
) -> None:
    """Version 5 adds each session's principal (those of before are `local`'s) and an index of turns by id."""
    conn = sqlite3.connect(tmp_path / "state.db")
    for script in _sqlite_db._MIGRATIONS[:4]:  # pyright: ignore[reportPrivateUsage]
        conn.executescript(script)
    conn.execute(
        "INSERT INTO sessions (session_id, title, metadata, created_at, updated_at)"
        " VALUES ('ses_1', 't', '{}', 'x', 'x')"
    )
    record = completed(running("ses_1").model_copy(update={"turn_id": "turn_1"}))
    conn.execute(
        "INSERT INTO turns (session_id, turn_id, status, record, owner)"
        " VALUES ('ses_1', 'turn_1', 'completed', ?, 'o')",
        (record.model_dump_json(),),
    )
    conn.execute("PRAGMA user_version = 4")
    conn.commit()
    conn.close()
    store = await SqliteStore.open(tmp_path)
    try:
        assert await store.session_owner("ses_1") == "local"
        assert [s.session_id for s in (await store.list_sessions(cursor=None, limit=5))[0]] == ["ses_1"]
        assert await store.list_sessions(cursor=None, limit=5, principal="alice") == ([], None)
        assert await store.find_turn("turn_1", principal="local") == record
    finally:
        await store.close()
    conn = sqlite3.connect(tmp_path / "state.db")
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        plan = conn.execute("EXPLAIN QUERY PLAN SELECT record FROM turns WHERE turn_id = 'turn_1'").fetchall()
        assert "turns_by_id" in str(plan)
    finally:
        conn.close()


# --- the session turn lock, shared through the state dir -------------------------------------

# argv: state dir, session id. Takes the session's turn lock, says "held", then dies holding it.
LOCK_HOLDING_CHILD = textwrap.dedent(
    """
    import os, sys, anyio
    from pathlib import Path
    from agent_server.store.sqlite import SqliteStore

    async def main():
        store = await SqliteStore.open(Path(sys.argv[1]))
        async with store.hold_turn(sys.argv[2]):
            sys.stdout.write("held\\n")
            sys.stdout.flush()
            sys.stdin.readline()
            os._exit(0)

    anyio.run(main)
    """
)


async def test_a_sessions_turn_lock_is_held_against_every_other_store_on_the_state_dir(tmp_path: Path) -> None:
    one, two = await SqliteStore.open(tmp_path), await SqliteStore.open(tmp_path)
    busy: list[str] = []
    try:
        with anyio.fail_after(10):
            async with one.hold_turn("ses_a") as held:
                assert held
                deadline = anyio.current_time() + 0.2
                async with two.hold_turn("ses_a", deadline=deadline, on_busy=lambda: busy.append("a")) as waited:
                    assert waited is False  # the deadline passed while the other store held it
                async with two.hold_turn("ses_b", on_busy=lambda: busy.append("b")) as other:
                    assert other  # another session is free
            async with two.hold_turn("ses_a") as after:
                assert after  # released with the block
    finally:
        await one.close()
        await two.close()
    assert busy == ["a"]


async def test_a_dead_processs_turn_lock_is_free_at_once(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", LOCK_HOLDING_CHILD, str(tmp_path), "ses_x"]
    store = await SqliteStore.open(tmp_path)
    try:
        with anyio.fail_after(20):
            async with await anyio.open_process(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=CHILD_ENV
            ) as child:
                assert child.stdin is not None
                assert await read_line(child) == b"held\n"
                async with store.hold_turn("ses_x", deadline=anyio.current_time() + 0.1) as held:
                    assert held is False  # the child holds it
                await child.stdin.send(b"\n")
                await child.wait()
            async with store.hold_turn("ses_x", deadline=anyio.current_time() + 5) as held:
                assert held  # the kernel dropped the dead child's lock
    finally:
        await store.close()


@pytest.mark.skipif(not BYTE_LOCKS, reason="sessions' turn locks are bytes of one file on 64-bit Linux only")
async def test_turn_locks_make_no_file_per_session(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path)
    try:
        for _ in range(3):
            session = await store.create_session(title="s", metadata={})
            async with store.hold_turn(session.session_id) as held:
                assert held
        assert [p.name for p in (tmp_path / "turn_locks").iterdir()] == ["sessions.lock"]
    finally:
        await store.close()


@pytest.mark.parametrize("byte_locks", [False, *([True] if BYTE_LOCKS else [])])
async def test_a_held_turn_lock_excludes_another_holder_until_released(tmp_path: Path, byte_locks: bool) -> None:
    locks = TurnLockFiles(tmp_path, byte_locks=byte_locks)
    held = locks.try_lock("ses_a")
    assert held is not None
    assert locks.try_lock("ses_a") is None  # another holder in the same process is refused too
    other = locks.try_lock("ses_b")
    assert other is not None
    locks.release(held)
    again = locks.try_lock("ses_a")
    assert again is not None
    locks.release(again)
    locks.release(other)


async def test_deleting_a_session_leaves_no_turn_lock_file(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path)
    try:
        session = await store.create_session(title="s", metadata={})
        async with store.hold_turn(session.session_id) as held:
            assert held
        await store.delete_session(session.session_id)
        assert not (tmp_path / "turn_locks" / f"{session.session_id}.lock").exists()
    finally:
        await store.close()


async def test_without_byte_locks_deleting_a_session_removes_its_lock_file(tmp_path: Path) -> None:
    locks = TurnLockFiles(tmp_path, byte_locks=False)
    fd = locks.try_lock("ses_a")
    assert fd is not None
    locks.release(fd)
    assert (tmp_path / "ses_a.lock").exists()
    locks.remove("ses_a")
    assert not (tmp_path / "ses_a.lock").exists()


async def test_a_version_5_database_gains_the_web_views_questions(tmp_path: Path) -> None:
    """Version 6 adds the table of the web view's pending approvals; the sessions of before stay."""
    from tests.unit.store.test_view_board import question

    conn = sqlite3.connect(tmp_path / "state.db")
    for script in _sqlite_db._MIGRATIONS[:5]:  # pyright: ignore[reportPrivateUsage]
        conn.executescript(script)
    conn.execute(
        "INSERT INTO sessions (session_id, title, metadata, created_at, updated_at)"
        " VALUES ('ses_1', 't', '{}', 'x', 'x')"
    )
    conn.execute("PRAGMA user_version = 5")
    conn.commit()
    conn.close()
    store = await SqliteStore.open(tmp_path)
    try:
        waiting = question("ses_1")
        await store.post_question(waiting)
        assert await store.pending_questions("local") == [waiting]
        assert (await store.get_session("ses_1")).title == "t"
    finally:
        await store.close()
