"""The `store` fixture: every SessionStore implementation, fresh per test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent_server.store.base import SessionStore
from agent_server.store.memory import MemoryStore
from agent_server.store.sqlite import SqliteStore


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str) -> AsyncIterator[SessionStore]:
    opened: SessionStore = MemoryStore() if request.param == "memory" else await SqliteStore.open(tmp_path / "state")
    try:
        yield opened
    finally:
        await opened.close()
