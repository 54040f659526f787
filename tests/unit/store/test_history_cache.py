"""The SQLite store keeps recently begun sessions' live histories parsed: a turn parses only what was added
since, and what another process appended or compacted is never missed."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agent_server.store import _common
from agent_server.store._history_cache import HistoryCache
from agent_server.store.sqlite import SqliteStore
from agent_server.types import Message, StoredMessage
from tests.unit.store.helpers import compaction, completed, exchange, run_turn, running

pytestmark = pytest.mark.anyio


class _CountingJson:
    """`json` as `_common` uses it (the parse of every stored message), counting the messages it parses."""

    def __init__(self) -> None:
        self.parsed = 0

    def loads(self, text: str) -> Any:
        self.parsed += 1
        return json.loads(text)

    def dumps(self, value: Any, **kwargs: Any) -> str:
        return json.dumps(value, **kwargs)


async def _begin_and_finish(store: SqliteStore, session_id: str, prompt: str) -> list[str]:
    """One turn adding two messages; the texts of the history it began from."""
    record = running(session_id, prompt=prompt)
    history = await store.begin_turn(record)
    assert await store.finish_turn(completed(record), exchange(prompt, f"answer to {prompt}"))
    return [m.message.text() for m in history.messages]


async def test_a_turn_parses_only_the_messages_added_since_the_last_one_began(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await SqliteStore.open(tmp_path)
    session = await store.create_session(title="t", metadata={})
    for n in range(20):
        await _begin_and_finish(store, session.session_id, f"q{n}")
    counting = _CountingJson()
    monkeypatch.setattr(_common, "json", counting)
    texts = await _begin_and_finish(store, session.session_id, "last")
    assert len(texts) == 40
    assert texts[-2:] == ["q19", "answer to q19"]
    assert counting.parsed == 2  # the previous turn's two messages, not all 40
    await store.close()


async def test_what_another_process_appends_is_in_the_next_turns_history(tmp_path: Path) -> None:
    mine, theirs = await SqliteStore.open(tmp_path), await SqliteStore.open(tmp_path)
    session = await mine.create_session(title="t", metadata={})
    await _begin_and_finish(mine, session.session_id, "a")
    await _begin_and_finish(theirs, session.session_id, "b")
    assert await _begin_and_finish(mine, session.session_id, "c") == ["a", "answer to a", "b", "answer to b"]
    await mine.close()
    await theirs.close()


async def test_a_compaction_by_another_process_is_seen_at_the_next_turn(tmp_path: Path) -> None:
    mine, theirs = await SqliteStore.open(tmp_path), await SqliteStore.open(tmp_path)
    session = await mine.create_session(title="t", metadata={})
    for prompt in ("a", "b"):
        await _begin_and_finish(mine, session.session_id, prompt)
    await _begin_and_finish(mine, session.session_id, "c")  # the store now holds a, b parsed
    await theirs.save_compaction(session.session_id, compaction("S"), archive_through_seq=2, live_from_seq=3)
    record = running(session.session_id)
    history = await mine.begin_turn(record)
    assert history.summary == "S"
    assert [m.message.text() for m in history.messages] == ["b", "answer to b", "c", "answer to c"]
    await mine.close()
    await theirs.close()


async def test_a_compaction_that_archives_everything_leaves_an_empty_history(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path)
    session = await store.create_session(title="t", metadata={})
    done = await run_turn(store, session.session_id, "a")
    assert done.status == "completed"
    await _begin_and_finish(store, session.session_id, "b")
    await store.save_compaction(session.session_id, compaction("all"), archive_through_seq=4, live_from_seq=5)
    history = await store.begin_turn(running(session.session_id))
    assert (history.summary, history.messages) == ("all", [])
    await store.close()


def _stored(seq: int, chars: int = 10) -> tuple[StoredMessage, int]:
    return StoredMessage(seq=seq, turn_id=None, message=Message(role="user", content=str(seq))), chars


def test_the_cache_is_bounded_by_sessions_and_characters() -> None:
    cache = HistoryCache(sessions=2, chars=100)
    for session in ("a", "b", "c"):
        cache.history(session, None, cache.resume(session, summary=None, live_prefix=(None, 0)), [_stored(1)])
    assert "a" not in cache and "b" in cache and "c" in cache  # the least recently used went
    cache.history("big", None, cache.resume("big", summary=None, live_prefix=(None, 0)), [_stored(1, chars=101)])
    assert "big" not in cache  # larger than the whole budget: not kept
    kept = [_stored(seq, chars=30) for seq in (1, 2, 3)]
    cache.history("d", None, cache.resume("d", summary=None, live_prefix=(None, 0)), kept)
    assert "d" in cache and "c" in cache and "b" not in cache  # 100 of 100 characters, two sessions
    cache.history("e", None, cache.resume("e", summary=None, live_prefix=(None, 0)), [_stored(1, chars=20)])
    assert "e" in cache and "c" not in cache and "d" not in cache  # 120 characters: the oldest went until 20


def test_a_remembered_history_holds_only_while_its_first_message_and_summary_do() -> None:
    cache = HistoryCache()
    cache.history("s", None, cache.resume("s", summary=None, live_prefix=(None, 0)), [_stored(1), _stored(2)])
    assert cache.resume("s", summary=None, live_prefix=(1, 2)).after == 2
    assert cache.resume("s", summary=None, live_prefix=(2, 1)).after == 0  # message 1 was archived
    assert cache.resume("s", summary=None, live_prefix=(1, 1)).after == 0  # a row went behind the store's back
    assert cache.resume("s", summary="new", live_prefix=(1, 2)).after == 0  # a compaction set a summary
    assert cache.resume("t", summary=None, live_prefix=(None, 0)).after == 0  # never seen


async def test_messages_removed_behind_the_stores_back_are_not_served_from_memory(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path)
    session = await store.create_session(title="t", metadata={})
    for prompt in ("a", "b", "c"):
        await _begin_and_finish(store, session.session_id, prompt)  # the store holds a, b parsed
    with sqlite3.connect(tmp_path / "state.db") as conn:  # a hand edit: the second turn's rows go
        conn.execute("DELETE FROM messages WHERE session_id = ? AND seq IN (3, 4)", (session.session_id,))
    history = await store.load_history(session.session_id)
    assert [m.message.text() for m in history.messages] == ["a", "answer to a", "c", "answer to c"]
    await store.close()
