"""A running turn's record, written to the store as it goes (settings `view.progress_interval_s`).

So that a page of the web view in another process, or on another replica, shows a turn live from what is
stored: its model calls and tool rounds so far, the calls it waits on, its approvals. At most one write per
interval, and only when the record changed since the last one; a turn that ends within the first interval
writes nothing more than its start and its end. A write that fails is logged and tried again at the next
change: it never fails the turn.

One `ProgressKeeper` task serves every turn of a runtime (the runtime runs it while it is entered): a turn only
registers its state for as long as it runs (`watching`). A task of each turn's own, started and cancelled with
it, cost about 150 us of a 2.8 ms turn (`bench/README.md`, "Part 7"), and most turns end within the first
interval. A write of a turn that ended meanwhile changes nothing: the store writes progress only while the
stored record is `running`.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import anyio

from agent_server.errors import AgentServerError

if TYPE_CHECKING:  # the turn code is imported after start-up; the runtime makes its keeper as it is entered
    from agent_server.store.base import SessionStore
    from agent_server.types import TurnRecord

logger = logging.getLogger(__name__)


class RunningTurn(Protocol):
    """What the keeper reads of a turn (`agent.turn_state.TurnState`): its record as it is now."""

    @property
    def record(self) -> TurnRecord: ...


@dataclass
class _Watched:
    store: SessionStore
    state: RunningTurn
    written: TurnRecord
    """The record last written (at first the `running` one the turn began with)."""
    due: float
    """When the turn's record is looked at next, on anyio's clock: an interval after its start or last look."""


class ProgressKeeper:
    """Writes the records of the turns it watches as they go, each at most every `interval_s` (module docstring).
    `run` is its task; `watching` registers one turn."""

    def __init__(self, interval_s: float) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be positive, not {interval_s!r}")
        self.interval_s = interval_s
        self._watched: dict[int, _Watched] = {}
        self._arrived = anyio.Event()
        """Set when a turn is watched: the task, idle while none is, looks again."""

    @contextmanager
    def watching(self, store: SessionStore, state: RunningTurn) -> Generator[None]:
        """While the block runs, `state`'s record is written to `store` whenever it changed, at most every
        interval (the first time one interval after now)."""
        key = id(state)
        self._watched[key] = _Watched(store, state, state.record, anyio.current_time() + self.interval_s)
        self._arrived.set()
        try:
            yield
        finally:
            del self._watched[key]

    async def run(self) -> None:
        """Until cancelled: sleep until the next turn is due, write the due ones that changed; idle while no
        turn is watched."""
        while True:
            if not self._watched:
                await self._arrived.wait()
                self._arrived = anyio.Event()
                continue
            await anyio.sleep_until(min(watched.due for watched in self._watched.values()))
            now = anyio.current_time()
            for watched in [w for w in self._watched.values() if w.due <= now]:
                watched.due = now + self.interval_s
                await self._write(watched)

    @staticmethod
    async def _write(watched: _Watched) -> None:
        record = watched.state.record
        if record is watched.written or record.status != "running":
            return
        try:
            await watched.store.save_progress(record)
        except AgentServerError as exc:
            logger.debug("could not store the progress of turn %s: %s", record.turn_id, exc.message)
            return
        except Exception:  # a bug below must not stop the progress of every other turn
            logger.exception("could not store the progress of turn %s", record.turn_id)
            return
        watched.written = record
