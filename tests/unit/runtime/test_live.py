"""The live feed of this process's turns (`agent_server.runtime.live`): per principal, bounded, never waiting."""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from agent_server.events import StatusEvent
from agent_server.runtime.live import MAX_WATCHERS, WATCHER_BUFFER, LiveFeed, TooManyWatchers


def status(n: int) -> StatusEvent:
    return StatusEvent(phase="sampling", message=f"m{n}", turn_id="turn_1", session_id="ses_1", trace_id="t")


def test_a_watcher_gets_its_principals_events_and_counts_what_it_was_too_slow_for() -> None:
    feed = LiveFeed()
    with feed.watch("alice") as alice, feed.watch("bob") as bob:
        for n in range(WATCHER_BUFFER + 3):
            feed.publish("alice", status(n))
        assert alice.lost == 3 and bob.lost == 0
        assert alice.events.receive_nowait().message == "m0"
        assert bob.events.statistics().current_buffer_used == 0
    feed.publish("alice", status(0))  # nobody watches: nothing is kept


def test_watchers_are_bounded() -> None:
    feed = LiveFeed()
    with ExitStack() as stack:
        for _ in range(MAX_WATCHERS):
            stack.enter_context(feed.watch("alice"))
        with pytest.raises(TooManyWatchers):
            stack.enter_context(feed.watch("bob"))
    with feed.watch("bob"):  # room again once they left
        pass
