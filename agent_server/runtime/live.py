"""The events of this process's turns, as they happen, for the pages of the web view that watch them.

Every turn a runtime runs publishes its events here (with its principal); a page subscribes with `watch`
and gets the events of its principal's turns. Bounded: each watcher holds at most `WATCHER_BUFFER` events;
a watcher that falls behind loses the newest ones and is told so (`Watch.lost`), and a turn never waits for
a page. Turns of other processes and replicas are not here: a page shows those by their stored state
(`SessionStore.save_progress`).
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass, field

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from agent_server.events import AgentEvent

WATCHER_BUFFER = 512
MAX_WATCHERS = 64
"""Pages watching at once; one more is refused (`TooManyWatchers`)."""


class TooManyWatchers(Exception):
    """`MAX_WATCHERS` pages watch already."""


@dataclass(eq=False)
class Watch:
    principal: str
    events: MemoryObjectReceiveStream[AgentEvent]
    send: MemoryObjectSendStream[AgentEvent]
    lost: int = 0
    """Events dropped because the watcher was behind (the page then reloads what is stored)."""


@dataclass
class LiveFeed:
    _watches: set[Watch] = field(default_factory=set[Watch])

    def publish(self, principal: str, event: AgentEvent) -> None:
        """Hand `event` of a turn of `principal`'s to each of its watchers, never waiting."""
        for watch in self._watches:
            if watch.principal != principal:
                continue
            try:
                watch.send.send_nowait(event)
            except anyio.WouldBlock:
                watch.lost += 1

    def watched(self, principal: str) -> bool:
        """Whether a page watches `principal`'s turns now."""
        return any(watch.principal == principal for watch in self._watches)

    def has_room(self) -> bool:
        return len(self._watches) < MAX_WATCHERS

    @contextmanager
    def watch(self, principal: str) -> Generator[Watch]:
        """Watch `principal`'s turns while the block runs.

        Raises:
            TooManyWatchers: `MAX_WATCHERS` watch already.
        """
        if len(self._watches) >= MAX_WATCHERS:
            raise TooManyWatchers(f"{MAX_WATCHERS} pages watch this server's turns already")
        send, receive = anyio.create_memory_object_stream[AgentEvent](WATCHER_BUFFER)
        watch = Watch(principal, receive, send)
        self._watches.add(watch)
        try:
            yield watch
        finally:
            self._watches.discard(watch)
            send.close()
            receive.close()
