"""The principal column of the `SessionStore` contract (see `agent_server/store/base.py`), on every store."""

from __future__ import annotations

import pytest

from agent_server.errors import SessionNotFound
from agent_server.store.base import SessionStore
from tests.unit.store.helpers import completed, exchange, run_turn, running

pytestmark = pytest.mark.anyio


async def test_a_session_belongs_to_the_principal_that_made_it_local_by_default(store: SessionStore) -> None:
    mine = await store.create_session(title="a", metadata={}, principal="alice")
    local = await store.create_session(title="b", metadata={})
    assert await store.session_owner(mine.session_id) == "alice"
    assert await store.session_owner(local.session_id) == "local"
    with pytest.raises(SessionNotFound):
        await store.session_owner("ses_unknown")


async def test_list_sessions_lists_one_principals_sessions_with_its_own_paging(store: SessionStore) -> None:
    alice = [(await store.create_session(title=f"a{i}", metadata={}, principal="alice")).session_id for i in range(3)]
    bob = (await store.create_session(title="b", metadata={}, principal="bob")).session_id
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(5):
        page, cursor = await store.list_sessions(cursor=cursor, limit=2, principal="alice")
        seen += [s.session_id for s in page]
        if cursor is None:
            break
    assert seen == alice[::-1]
    assert [s.session_id for s in (await store.list_sessions(cursor=None, limit=9, principal="bob"))[0]] == [bob]
    assert await store.list_sessions(cursor=None, limit=9) == ([], None)  # `local` made none
    assert await store.list_sessions(cursor=None, limit=9, principal="carol") == ([], None)


async def test_a_fork_belongs_to_its_sources_principal(store: SessionStore) -> None:
    source = await store.create_session(title="a", metadata={}, principal="alice")
    await run_turn(store, source.session_id)
    fork = await store.fork_session(source.session_id, at_turn=None, title=None)
    assert await store.session_owner(fork.session_id) == "alice"
    listed, _ = await store.list_sessions(cursor=None, limit=9, principal="alice")
    assert {s.session_id for s in listed} == {source.session_id, fork.session_id}


async def test_find_turn_finds_a_turn_by_its_id_alone_among_its_principals_sessions(store: SessionStore) -> None:
    session = await store.create_session(title="a", metadata={}, principal="alice")
    record = running(session.session_id)
    await store.begin_turn(record)
    assert await store.find_turn(record.turn_id, principal="alice") == record  # running
    done = completed(record)
    assert await store.finish_turn(done, exchange("q", "a"))
    assert await store.find_turn(record.turn_id, principal="alice") == done  # finished
    assert await store.find_turn(record.turn_id, principal="bob") is None  # another principal's: not found
    assert await store.find_turn(record.turn_id, principal="local") is None
    assert await store.find_turn("turn_unknown", principal="alice") is None


async def test_find_turn_of_a_turn_a_fork_copied_gives_the_one_begun_first(store: SessionStore) -> None:
    source = await store.create_session(title="a", metadata={}, principal="alice")
    turn = await run_turn(store, source.session_id)
    fork = await store.fork_session(source.session_id, at_turn=None, title=None)
    assert (await store.get_turn(fork.session_id, turn.turn_id)).session_id == fork.session_id  # the copy
    found = await store.find_turn(turn.turn_id, principal="alice")
    assert found is not None and found.session_id == source.session_id
    await store.delete_session(source.session_id)
    found = await store.find_turn(turn.turn_id, principal="alice")
    assert found is not None and found.session_id == fork.session_id
