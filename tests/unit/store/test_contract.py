"""The `SessionStore` contract (see `agent_server/store/base.py`), checked on every store; forks are in test_fork."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agent_server.errors import CompactionConflict, InvalidArgument, SessionNotFound, StoreError, TurnNotFound
from agent_server.ids import ID_MAX_CHARS, check_ids
from agent_server.store.base import SessionStore
from agent_server.types import (
    UNTITLED,
    ErrorInfo,
    ImagePart,
    Message,
    TextPart,
    ToolCall,
    TurnRecord,
)
from tests.unit.store.helpers import compaction, completed, exchange, run_turn, running

pytestmark = pytest.mark.anyio


# --- sessions ------------------------------------------------------------------------------


async def test_create_and_get_session(store: SessionStore) -> None:
    info = await store.create_session(title="first", metadata={"client": "ide", "n": [1, 2]})
    assert info.title == "first"
    assert info.metadata == {"client": "ide", "n": [1, 2]}
    assert (info.turn_count, info.active) == (0, False)
    assert info.created_at == info.updated_at
    assert await store.get_session(info.session_id) == info


async def test_titles_keep_every_character(store: SessionStore) -> None:
    """A title is the client's text (or the start of a prompt): NUL and quotes included, as given."""
    title = 'a\x00b "quoted" \\ é'
    info = await store.create_session(title=title, metadata={})
    assert (await store.get_session(info.session_id)).title == title
    assert (await store.fork_session(info.session_id, at_turn=None, title=None)).title == f"{title} (fork)"


async def test_messages_keep_every_character(store: SessionStore) -> None:
    """A history holds what the model and the tools said, as said: NUL, quotes, backslashes, the characters of an
    array literal ({, }, commas, NULL), line breaks and non-ASCII, in every part a message has."""
    text = 'a\x00b "q" \\ {x, "y"} NULL,\n\té 😀'
    info = await store.create_session(title="chars", metadata={})
    record = running(info.session_id, prompt=text)
    await store.begin_turn(record)
    messages = [
        Message(role="user", content=text),
        Message(role="assistant", content=text, tool_calls=[ToolCall(id="c1", name="t", arguments={text: [text]})]),
        Message(role="tool", content=[TextPart(text=text)], tool_call_id="c1"),
    ]
    assert await store.finish_turn(completed(record, text=text), messages)
    assert [m.message for m in (await store.load_history(info.session_id)).messages] == messages


async def test_list_sessions_newest_first_with_paging(store: SessionStore) -> None:
    ids = [(await store.create_session(title=f"s{i}", metadata={})).session_id for i in range(5)]
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(10):
        page, cursor = await store.list_sessions(cursor=cursor, limit=2)
        assert len(page) <= 2
        seen += [s.session_id for s in page]
        if cursor is None:
            break
    assert seen == ids[::-1]


async def test_list_sessions_exact_page_has_no_next_cursor(store: SessionStore) -> None:
    for i in range(2):
        await store.create_session(title=f"s{i}", metadata={})
    page, cursor = await store.list_sessions(cursor=None, limit=2)
    assert (len(page), cursor) == (2, None)
    assert await store.list_sessions(cursor=None, limit=5) == (page, None)


async def test_list_sessions_paging_is_stable_under_inserts_and_deletes(store: SessionStore) -> None:
    a, b, c = [await store.create_session(title=t, metadata={}) for t in "abc"]
    page, cursor = await store.list_sessions(cursor=None, limit=1)
    assert [s.session_id for s in page] == [c.session_id]
    await store.create_session(title="d", metadata={})
    await store.delete_session(b.session_id)
    page, cursor = await store.list_sessions(cursor=cursor, limit=5)
    assert ([s.session_id for s in page], cursor) == ([a.session_id], None)


async def test_list_sessions_shows_turn_count_and_no_active_flag(store: SessionStore) -> None:
    one = await store.create_session(title="one", metadata={})
    two = await store.create_session(title="two", metadata={})
    await run_turn(store, one.session_id)
    await store.begin_turn(running(one.session_id))
    page, _ = await store.list_sessions(cursor=None, limit=10)
    assert [(s.session_id, s.active, s.turn_count) for s in page] == [
        (two.session_id, False, 0),
        (one.session_id, False, 2),  # which session is current is per connection, not stored
    ]
    assert (await store.get_session(one.session_id)).turn_count == 2


@pytest.mark.parametrize("cursor", ["", "garbage!", "c2Vzc2lvbnM6eA", "dHVybnM6Mw"])
async def test_malformed_cursors_are_invalid_arguments(store: SessionStore, cursor: str) -> None:
    session = await store.create_session(title="s", metadata={})
    if cursor != "dHVybnM6Mw":  # a turns cursor ("turns:3") is fine for list_turns
        with pytest.raises(InvalidArgument):
            await store.list_turns(session.session_id, cursor=cursor, limit=5)
    with pytest.raises(InvalidArgument):
        await store.list_sessions(cursor=cursor, limit=5)


async def test_limit_below_one_is_an_invalid_argument(store: SessionStore) -> None:
    session = await store.create_session(title="s", metadata={})
    with pytest.raises(InvalidArgument):
        await store.list_sessions(cursor=None, limit=0)
    with pytest.raises(InvalidArgument):
        await store.list_turns(session.session_id, cursor=None, limit=0)


async def test_delete_session_removes_everything(store: SessionStore) -> None:
    keep = await store.create_session(title="keep", metadata={})
    gone = await store.create_session(title="gone", metadata={})
    await run_turn(store, gone.session_id)
    await store.save_compaction(gone.session_id, compaction("s"), archive_through_seq=1, live_from_seq=1)
    await store.delete_session(gone.session_id)
    with pytest.raises(SessionNotFound):
        await store.get_session(gone.session_id)
    page, _ = await store.list_sessions(cursor=None, limit=10)
    assert [s.session_id for s in page] == [keep.session_id]
    with pytest.raises(SessionNotFound):
        await store.delete_session(gone.session_id)


async def test_approvals_are_remembered_per_session_and_go_with_it(store: SessionStore) -> None:
    one = await store.create_session(title="one", metadata={})
    other = await store.create_session(title="other", metadata={})
    await store.remember_approval(one.session_id, "write_file")
    await store.remember_approval(one.session_id, "write_file")  # twice is once
    await store.remember_approval(one.session_id, "fs__edit_file")
    assert await store.approved_tools(one.session_id) == {"write_file", "fs__edit_file"}
    assert await store.approved_tools(other.session_id) == frozenset()
    fork = await store.fork_session(one.session_id, at_turn=None, title=None)
    assert await store.approved_tools(fork.session_id) == frozenset()  # a fork asks again
    await store.delete_session(one.session_id)
    again = await store.create_session(title="again", metadata={})
    assert await store.approved_tools(again.session_id) == frozenset()


UNKNOWN_SESSION_CALLS: dict[str, Callable[[SessionStore], Awaitable[Any]]] = {
    "get_session": lambda s: s.get_session("ses_missing"),
    "delete_session": lambda s: s.delete_session("ses_missing"),
    "load_history": lambda s: s.load_history("ses_missing"),
    "all_messages": lambda s: s.all_messages("ses_missing"),
    "list_messages": lambda s: s.list_messages("ses_missing", cursor=None, limit=5),
    "begin_turn": lambda s: s.begin_turn(running("ses_missing")),
    "get_turn": lambda s: s.get_turn("ses_missing", "turn_x"),
    "list_turns": lambda s: s.list_turns("ses_missing", cursor=None, limit=5),
    "save_compaction": lambda s: s.save_compaction(
        "ses_missing", compaction("s"), archive_through_seq=0, live_from_seq=1
    ),
    "list_compactions": lambda s: s.list_compactions("ses_missing"),
    "fork_session": lambda s: s.fork_session("ses_missing", at_turn=None, title=None),
    "remember_approval": lambda s: s.remember_approval("ses_missing", "write_file"),
    "approved_tools": lambda s: s.approved_tools("ses_missing"),
}


@pytest.mark.parametrize("method", sorted(UNKNOWN_SESSION_CALLS))
async def test_unknown_session_raises_session_not_found(store: SessionStore, method: str) -> None:
    with pytest.raises(SessionNotFound):
        await UNKNOWN_SESSION_CALLS[method](store)


WELL_FORMED_EDGES = ["a", "-", "_", "Z" * ID_MAX_CHARS, "AZaz09_-", "ses_0123456789abcdef"]
"""Ids at the edges of the grammar (`agent_server.ids`): the runtime lets every such id reach a store."""


@pytest.mark.parametrize("an_id", WELL_FORMED_EDGES, ids=["one", "dash", "underscore", "longest", "mixed", "made"])
async def test_every_well_formed_id_is_stored_or_not_found_never_a_store_error(store: SessionStore, an_id: str) -> None:
    check_ids(session_id=an_id)  # ids are checked where they enter: malformed ones never reach a store
    with pytest.raises(SessionNotFound):
        await store.get_session(an_id)
    with pytest.raises(SessionNotFound):
        await store.begin_turn(running(an_id))
    with pytest.raises(SessionNotFound):
        await store.list_turns(an_id, cursor=None, limit=5)
    session = (await store.create_session(title="t", metadata={})).session_id
    with pytest.raises(TurnNotFound):
        await store.get_turn(session, an_id)
    record = running(session, turn_id=an_id)
    await store.begin_turn(record)
    assert await store.finish_turn(completed(record), exchange("q", "a"))
    assert (await store.get_turn(session, an_id)).status == "completed"
    with pytest.raises(InvalidArgument):
        check_ids(session_id=an_id + "\x00")


# --- turns and history ---------------------------------------------------------------------


async def test_begin_turn_is_visible_as_running(store: SessionStore) -> None:
    session = await store.create_session(title="s", metadata={})
    record = running(session.session_id)
    await store.begin_turn(record)
    assert await store.get_turn(session.session_id, record.turn_id) == record
    assert (await store.list_turns(session.session_id, cursor=None, limit=5)) == ([record], None)
    assert (await store.load_history(session.session_id)).messages == []


async def test_begin_turn_returns_the_history_the_turn_starts_from(store: SessionStore) -> None:
    session = await store.create_session(title="s", metadata={})
    await run_turn(store, session.session_id, prompt="first")
    await store.save_compaction(session.session_id, compaction("S"), archive_through_seq=1, live_from_seq=1)
    started = await store.begin_turn(running(session.session_id))
    assert started == await store.load_history(session.session_id)
    assert started.summary == "S" and [m.seq for m in started.messages] == [2]


async def test_begin_turn_twice_is_a_store_error(store: SessionStore) -> None:
    session = await store.create_session(title="s", metadata={})
    record = running(session.session_id)
    await store.begin_turn(record)
    with pytest.raises(StoreError):
        await store.begin_turn(record)


async def test_a_turn_stored_before_it_began_moves_last_when_it_begins(store: SessionStore) -> None:
    """A background turn is stored `running` when started; a turn that began meanwhile ran before it, so its
    place (and its messages') is after that one, where its `begin_turn(stored=True)` puts it."""
    session = await store.create_session(title="s", metadata={})
    queued = running(session.session_id).model_copy(update={"prompt": "queued"})
    assert await store.finish_turn(queued, [])
    await run_turn(store, session.session_id, "ran first")
    await store.begin_turn(queued, stored=True)
    await store.finish_turn(completed(queued), [Message(role="user", content="queued")])
    turns, _ = await store.list_turns(session.session_id, cursor=None, limit=10)
    assert [t.prompt for t in turns] == ["ran first", "queued"]
    assert [t.status for t in turns] == ["completed", "completed"]
    history = await store.load_history(session.session_id)
    assert [m.message.content for m in history.messages if m.message.role == "user"] == ["ran first", "queued"]


async def test_finish_turn_writes_record_and_messages(store: SessionStore) -> None:
    session = await store.create_session(title="s", metadata={})
    first = await run_turn(store, session.session_id, "one")
    record = running(session.session_id)
    await store.begin_turn(record)
    final = completed(record).model_copy(update={"error": ErrorInfo(type="x", message="y")})
    rich = [
        Message(role="user", content="look"),
        Message(role="assistant", tool_calls=[ToolCall(id="c1", name="read_file", arguments={"path": "a"})]),
        Message(
            role="tool",
            tool_call_id="c1",
            name="read_file",
            content=[TextPart(text="img"), ImagePart(data="aGk=", mime_type="image/png")],
        ),
    ]
    assert await store.finish_turn(final, rich)
    assert await store.get_turn(session.session_id, record.turn_id) == final
    assert (await store.get_turn(session.session_id, record.turn_id)).transitions[0].from_ == "sampling"
    history = await store.load_history(session.session_id)
    assert history.summary is None
    assert [(m.seq, m.turn_id) for m in history.messages] == [
        (1, first.turn_id),
        (2, first.turn_id),
        (3, record.turn_id),
        (4, record.turn_id),
        (5, record.turn_id),
    ]
    assert [m.message for m in history.messages[2:]] == rich


async def test_finish_turn_bumps_updated_at(store: SessionStore) -> None:
    session = await store.create_session(title="s", metadata={})
    await run_turn(store, session.session_id)
    assert (await store.get_session(session.session_id)).updated_at >= session.updated_at


async def test_finish_turn_after_delete_writes_nothing(store: SessionStore) -> None:
    session = await store.create_session(title="s", metadata={})
    record = running(session.session_id)
    await store.begin_turn(record)
    await store.delete_session(session.session_id)
    assert not await store.finish_turn(completed(record), exchange("q", "a"))
    with pytest.raises(SessionNotFound):
        await store.get_turn(session.session_id, record.turn_id)
    with pytest.raises(SessionNotFound):
        await store.all_messages(session.session_id)
    page, _ = await store.list_sessions(cursor=None, limit=5)
    assert page == []


async def test_get_turn_unknown_turn(store: SessionStore) -> None:
    session = await store.create_session(title="s", metadata={})
    with pytest.raises(TurnNotFound):
        await store.get_turn(session.session_id, "turn_missing")


async def test_list_turns_oldest_first_with_paging(store: SessionStore) -> None:
    session = await store.create_session(title="s", metadata={})
    other = await store.create_session(title="other", metadata={})
    turns: list[TurnRecord] = []
    for i in range(5):
        turns.append(await run_turn(store, session.session_id, f"p{i}"))
        await run_turn(store, other.session_id)
    seen: list[TurnRecord] = []
    cursor: str | None = None
    for _ in range(10):
        page, cursor = await store.list_turns(session.session_id, cursor=cursor, limit=2)
        seen += page
        if cursor is None:
            break
    assert seen == turns


# --- compaction ------------------------------------------------------------------------------


async def test_compaction_archives_and_summarises(store: SessionStore) -> None:
    session = await store.create_session(title="s", metadata={})
    for prompt in ("a", "b"):
        await run_turn(store, session.session_id, prompt)
    record = compaction("the story so far")
    await store.save_compaction(session.session_id, record, archive_through_seq=2, live_from_seq=1)
    history = await store.load_history(session.session_id)
    assert history.summary == "the story so far"
    assert [m.seq for m in history.messages] == [3, 4]
    assert [(m.seq, archived) for m, archived in await store.all_messages(session.session_id)] == [
        (1, True),
        (2, True),
        (3, False),
        (4, False),
    ]
    assert await store.list_compactions(session.session_id) == [record]
    await run_turn(store, session.session_id, "c")
    assert [m.seq for m in (await store.load_history(session.session_id)).messages] == [3, 4, 5, 6]


async def test_dry_run_compaction_is_listed_but_changes_nothing(store: SessionStore) -> None:
    session = await store.create_session(title="s", metadata={})
    await run_turn(store, session.session_id)
    record = compaction("preview", dry_run=True)
    await store.save_compaction(session.session_id, record, archive_through_seq=2, live_from_seq=1)
    history = await store.load_history(session.session_id)
    assert (history.summary, len(history.messages)) == (None, 2)
    assert await store.list_compactions(session.session_id) == [record]


async def test_a_compaction_computed_from_a_stale_history_is_refused(store: SessionStore) -> None:
    """Two compactions from one loaded history (two processes): the second would lose messages 3-4."""
    session = await store.create_session(title="s", metadata={})
    for prompt in ("a", "b", "c"):
        await run_turn(store, session.session_id, prompt)
    winner = compaction("covers 1-4")
    await store.save_compaction(session.session_id, winner, archive_through_seq=4, live_from_seq=1)
    with pytest.raises(CompactionConflict):
        await store.save_compaction(
            session.session_id, compaction("covers 1-2"), archive_through_seq=2, live_from_seq=1
        )
    history = await store.load_history(session.session_id)
    assert (history.summary, [m.seq for m in history.messages]) == ("covers 1-4", [5, 6])
    assert await store.list_compactions(session.session_id) == [winner]
    # Computed from the winner's state, the next compaction goes through.
    await store.save_compaction(session.session_id, compaction("covers 1-5"), archive_through_seq=5, live_from_seq=5)
    assert [m.seq for m in (await store.load_history(session.session_id)).messages] == [6]


async def test_list_messages_pages_every_message_by_seq_with_archived_flags(store: SessionStore) -> None:
    session = await store.create_session(title="s", metadata={})
    for prompt in ("a", "b", "c"):
        await run_turn(store, session.session_id, prompt)
    await store.save_compaction(session.session_id, compaction("S"), archive_through_seq=3, live_from_seq=1)
    pages: list[list[tuple[int, bool]]] = []
    cursor: str | None = None
    for _ in range(10):
        page, cursor = await store.list_messages(session.session_id, cursor=cursor, limit=4)
        pages.append([(m.seq, archived) for m, archived in page])
        if cursor is None:
            break
    assert pages == [[(1, True), (2, True), (3, True), (4, False)], [(5, False), (6, False)]]
    everything = await store.all_messages(session.session_id)
    assert await store.list_messages(session.session_id, cursor=None, limit=6) == (everything, None)
    with pytest.raises(InvalidArgument):
        await store.list_messages(session.session_id, cursor="bogus", limit=4)
    with pytest.raises(InvalidArgument):
        await store.list_messages(session.session_id, cursor=None, limit=0)


async def test_an_untitled_session_takes_its_first_turns_prompt_as_title(store: SessionStore) -> None:
    untitled = await store.create_session(title=UNTITLED, metadata={})
    named = await store.create_session(title="named", metadata={})
    await run_turn(store, untitled.session_id, prompt="first  prompt\nof the session")
    await run_turn(store, untitled.session_id, prompt="second prompt")
    await run_turn(store, named.session_id, prompt="a prompt")
    assert (await store.get_session(untitled.session_id)).title == "first prompt of the session"
    assert (await store.get_session(named.session_id)).title == "named"


async def test_a_background_turn_stored_running_titles_its_session(store: SessionStore) -> None:
    """A background turn's `running` record is written by `finish_turn` (before it begins)."""
    session = await store.create_session(title=UNTITLED, metadata={})
    assert await store.finish_turn(running(session.session_id, prompt="in the background"), [])
    assert (await store.get_session(session.session_id)).title == "in the background"
