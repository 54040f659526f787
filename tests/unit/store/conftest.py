"""The `store` fixture: every SessionStore implementation, fresh per test (PostgreSQL: see tests/pg)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent_server.store.base import SessionStore
from agent_server.store.memory import MemoryStore
from agent_server.store.sqlite import SqliteStore
from tests.pg import fresh_schema


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str) -> AsyncIterator[SessionStore]:
    if request.param == "postgres":
        from agent_server.store.postgres import PostgresStore

        with fresh_schema() as url:
            opened = await PostgresStore.open(url)
            try:
                yield opened
            finally:
                await opened.close()
        return
    opened: SessionStore = MemoryStore() if request.param == "memory" else await SqliteStore.open(tmp_path / "state")
    try:
        yield opened
    finally:
        await opened.close()
