"""A running turn's record, written to the store as it goes (settings `view.progress_interval_s`).

So that a page of the web view in another process, or on another replica, shows a turn live from what is
stored: its model calls and tool rounds so far, the calls it waits on, its approvals. At most one write per
interval, and only when the record changed since the last one; a turn that ends within the first interval
writes nothing more than its start and its end. A write that fails is logged and tried again at the next
change: it never fails the turn.
"""

from __future__ import annotations

import logging

import anyio

from agent_server.agent.turn_state import TurnState
from agent_server.errors import AgentServerError
from agent_server.store.base import SessionStore

logger = logging.getLogger(__name__)


async def keep_progress(store: SessionStore, state: TurnState, interval_s: float) -> None:
    """Until cancelled: write `state`'s record to the store whenever it changed, at most every `interval_s`."""
    written = state.record
    while True:
        await anyio.sleep(interval_s)
        record = state.record
        if record is written or record.status != "running":
            continue
        try:
            await store.save_progress(record)
        except AgentServerError as exc:
            logger.debug("could not store the progress of turn %s: %s", record.turn_id, exc.message)
            continue
        written = record
