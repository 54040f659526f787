"""`fork_session` on every store: what the new session holds, before and after a compaction."""

from __future__ import annotations

import pytest

from agent_server.errors import InvalidArgument, TurnNotFound
from agent_server.store.base import SessionStore
from agent_server.types import TurnRecord
from tests.unit.store.helpers import compaction, completed, exchange, run_turn, running, texts

pytestmark = pytest.mark.anyio


# --- fork ------------------------------------------------------------------------------------


async def compacted_session(store: SessionStore) -> tuple[str, list[TurnRecord]]:
    """Turns t0, t1 (4 messages), a compaction archiving seqs 1-2 with summary S1, then t2 (seqs 5-6)."""
    session = await store.create_session(title="origin", metadata={"k": "v"})
    turns = [await run_turn(store, session.session_id, p) for p in ("t0", "t1")]
    await store.save_compaction(session.session_id, compaction("S1"), archive_through_seq=2, live_from_seq=1)
    turns.append(await run_turn(store, session.session_id, "t2"))
    return session.session_id, turns


async def test_fork_everything(store: SessionStore) -> None:
    source, turns = await compacted_session(store)
    fork = await store.fork_session(source, at_turn=None, title=None)
    assert fork.session_id != source
    assert (fork.title, fork.metadata, fork.turn_count, fork.active) == ("origin (fork)", {"k": "v"}, 3, False)
    assert await store.all_messages(fork.session_id) == await store.all_messages(source)
    assert await store.load_history(fork.session_id) == await store.load_history(source)
    assert await store.list_compactions(fork.session_id) == await store.list_compactions(source)
    forked_turns, _ = await store.list_turns(fork.session_id, cursor=None, limit=10)
    assert forked_turns == [t.model_copy(update={"session_id": fork.session_id}) for t in turns]


async def test_fork_before_the_compaction(store: SessionStore) -> None:
    source, turns = await compacted_session(store)
    fork = await store.fork_session(source, at_turn=turns[0].turn_id, title="early")
    assert (fork.title, fork.turn_count) == ("early", 1)
    history = await store.load_history(fork.session_id)
    assert history.summary is None
    assert await texts(store, fork.session_id) == ["t0", "answer to t0"]
    assert all(not archived for _, archived in await store.all_messages(fork.session_id))
    assert await store.list_compactions(fork.session_id) == []


async def test_fork_after_the_compaction(store: SessionStore) -> None:
    source, turns = await compacted_session(store)
    fork = await store.fork_session(source, at_turn=turns[1].turn_id, title=None)
    history = await store.load_history(fork.session_id)
    assert history.summary == "S1"
    assert [m.seq for m in history.messages] == [3, 4]
    assert [(m.seq, a) for m, a in await store.all_messages(fork.session_id)] == [
        (1, True),
        (2, True),
        (3, False),
        (4, False),
    ]
    assert len(await store.list_compactions(fork.session_id)) == 1
    page, _ = await store.list_turns(fork.session_id, cursor=None, limit=10)
    assert [t.turn_id for t in page] == [t.turn_id for t in turns[:2]]


async def test_fork_is_independent_of_its_source(store: SessionStore) -> None:
    source, turns = await compacted_session(store)
    fork = await store.fork_session(source, at_turn=turns[0].turn_id, title=None)
    await run_turn(store, fork.session_id, "new")
    assert [m.seq for m in (await store.load_history(fork.session_id)).messages] == [1, 2, 3, 4]
    assert await texts(store, fork.session_id) == ["t0", "answer to t0", "new", "answer to new"]
    assert len(await store.all_messages(source)) == 6
    await store.delete_session(source)
    assert (await store.get_session(fork.session_id)).turn_count == 2
    again = await store.fork_session(fork.session_id, at_turn=turns[0].turn_id, title=None)
    assert (again.title, again.turn_count) == ("origin (fork) (fork)", 1)


async def test_fork_at_unknown_turn(store: SessionStore) -> None:
    source, _ = await compacted_session(store)
    with pytest.raises(TurnNotFound):
        await store.fork_session(source, at_turn="turn_missing", title=None)


async def test_fork_at_a_running_turn_is_refused(store: SessionStore) -> None:
    session = await store.create_session(title="s", metadata={})
    await run_turn(store, session.session_id, "a")
    record = running(session.session_id)
    await store.begin_turn(record)
    with pytest.raises(InvalidArgument, match="still running"):
        await store.fork_session(session.session_id, at_turn=record.turn_id, title=None)


async def test_fork_while_a_turn_runs_leaves_it_out(store: SessionStore) -> None:
    """The fork holds the finished turns: a copy of the running one would stay `running` for good."""
    session = await store.create_session(title="s", metadata={})
    done = await run_turn(store, session.session_id, "a")
    await store.begin_turn(running(session.session_id))
    fork = await store.fork_session(session.session_id, at_turn=None, title=None)
    turns, _ = await store.list_turns(fork.session_id, cursor=None, limit=10)
    assert [(t.turn_id, t.status) for t in turns] == [(done.turn_id, "completed")]
    assert fork.turn_count == 1
    assert await texts(store, fork.session_id) == ["a", "answer to a"]


async def interleaved(store: SessionStore) -> tuple[str, TurnRecord, TurnRecord]:
    """T1 starts, T2 starts, T2 finishes first (seqs 1-2), T1 finishes (seqs 3-4): two processes' order."""
    session = await store.create_session(title="s", metadata={})
    one, two = running(session.session_id, prompt="one"), running(session.session_id, prompt="two")
    await store.begin_turn(one)
    await store.begin_turn(two)
    assert await store.finish_turn(completed(two), exchange("two", "answer to two"))
    assert await store.finish_turn(completed(one), exchange("one", "answer to one"))
    return session.session_id, one, two


async def test_fork_takes_the_turns_messages_not_a_position(store: SessionStore) -> None:
    source, one, two = await interleaved(store)
    fork = await store.fork_session(source, at_turn=one.turn_id, title=None)
    assert await texts(store, fork.session_id) == ["one", "answer to one"]
    assert {m.turn_id for m, _ in await store.all_messages(fork.session_id)} == {one.turn_id}
    page, _ = await store.list_turns(fork.session_id, cursor=None, limit=10)
    assert [t.turn_id for t in page] == [one.turn_id]
    everything = await store.fork_session(source, at_turn=two.turn_id, title=None)
    assert await texts(store, everything.session_id) == ["two", "answer to two", "one", "answer to one"]


async def test_fork_keeps_no_summary_of_a_turn_it_leaves_out(store: SessionStore) -> None:
    source, one, _ = await interleaved(store)
    await store.save_compaction(source, compaction("S covers two"), archive_through_seq=2, live_from_seq=1)
    fork = await store.fork_session(source, at_turn=one.turn_id, title=None)
    history = await store.load_history(fork.session_id)
    assert (history.summary, [m.seq for m in history.messages]) == (None, [3, 4])
    assert await store.list_compactions(fork.session_id) == []
