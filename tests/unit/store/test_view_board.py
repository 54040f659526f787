"""The web view's part of the `SessionStore` contract (see `agent_server/store/base.py`), on every store:
a running turn's progress, and the pending approvals every page lists and may answer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_server.store.base import SessionStore
from agent_server.types import AssistantTurn, PendingApproval, new_id, utc_now
from tests.unit.store.helpers import completed, exchange, running

pytestmark = pytest.mark.anyio


def question(session_id: str, *, principal: str = "local", expires_in_s: float = 60) -> PendingApproval:
    expires = (datetime.now(UTC) + timedelta(seconds=expires_in_s)).isoformat(timespec="milliseconds")
    return PendingApproval(
        question_id=new_id("q"),
        session_id=session_id,
        turn_id=new_id("turn"),
        call_id="call_1",
        tool="write_file",
        source="builtin",
        message="Allow the agent to run write_file?",
        shown="write_file a.txt",
        choices=["allow_once", "allow_session", "deny"],
        principal=principal,
        created_at=utc_now(),
        expires_at=expires,
    )


async def test_progress_shows_a_running_turn_so_far_and_never_overwrites_its_end(store: SessionStore) -> None:
    session = await store.create_session(title="s", metadata={})
    record = running(session.session_id)
    await store.begin_turn(record)
    before = (await store.get_session(session.session_id)).updated_at
    so_far = record.model_copy(update={"assistant_turns": [AssistantTurn(phase="initial", text="hm", duration_s=1.5)]})
    await store.save_progress(so_far)
    stored = await store.get_turn(session.session_id, record.turn_id)
    assert stored.status == "running" and stored.assistant_turns[0].duration_s == 1.5
    assert (await store.get_session(session.session_id)).updated_at == before
    done = completed(record)
    assert await store.finish_turn(done, exchange("q", "a"))
    await store.save_progress(so_far)  # late: the turn ended meanwhile
    assert await store.get_turn(session.session_id, record.turn_id) == done


async def test_a_question_is_listed_until_answered_once_by_its_principal(store: SessionStore) -> None:
    session = await store.create_session(title="s", metadata={})
    mine, theirs = question(session.session_id), question(session.session_id, principal="alice")
    await store.post_question(mine)
    await store.post_question(theirs)
    assert await store.pending_questions("local") == [mine]
    assert await store.pending_questions("alice") == [theirs]
    assert not await store.answer_question(mine.question_id, "allow_once", principal="alice")  # not alice's
    assert await store.question_answer(mine.question_id) is None
    assert await store.answer_question(mine.question_id, "deny", principal="local")
    assert not await store.answer_question(mine.question_id, "allow_once", principal="local")  # answered already
    assert await store.question_answer(mine.question_id) == "deny"
    assert await store.pending_questions("local") == []
    await store.drop_question(mine.question_id)
    assert await store.question_answer(mine.question_id) is None
    assert not await store.answer_question("q_unknown", "deny", principal="local")


async def test_an_expired_question_is_not_listed_nor_answerable_and_goes_with_the_next_post(
    store: SessionStore,
) -> None:
    session = await store.create_session(title="s", metadata={})
    old = question(session.session_id, expires_in_s=-1)
    await store.post_question(old)
    assert await store.pending_questions("local") == []
    assert not await store.answer_question(old.question_id, "allow_once", principal="local")
    fresh = question(session.session_id)
    await store.post_question(fresh)
    assert await store.pending_questions("local") == [fresh]


async def test_deleting_a_session_drops_its_questions(store: SessionStore) -> None:
    session = await store.create_session(title="s", metadata={})
    other = await store.create_session(title="t", metadata={})
    await store.post_question(question(session.session_id))
    kept = question(other.session_id)
    await store.post_question(kept)
    await store.delete_session(session.session_id)
    assert await store.pending_questions("local") == [kept]
