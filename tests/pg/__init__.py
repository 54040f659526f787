"""A PostgreSQL database for the tests, or the reason there is none.

Tests that need PostgreSQL take its URL from `AGENT_SERVER_TEST_PG` (a `postgresql://` URL of a database
they may create schemas in); `tests/pg/start-cluster.sh` starts a throwaway socket-only cluster and
prints one. Without it they are skipped, saying so; with `AGENT_SERVER_REQUIRE_PG=1` (CI) they fail
instead, so a CI that lost its database cannot pass by skipping. Each test gets a schema of its own
(`fresh_schema`), dropped afterwards, so tests never see each other's rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from agent_server.types import new_id

URL_ENV = "AGENT_SERVER_TEST_PG"
REQUIRE_ENV = "AGENT_SERVER_REQUIRE_PG"
NO_SERVER = (
    f"no PostgreSQL for the tests: set {URL_ENV}=postgresql://... (tests/pg/start-cluster.sh starts a throwaway "
    "cluster and prints the URL)"
)


def server_url() -> str:
    """The test server's URL; skips the test (fails it under AGENT_SERVER_REQUIRE_PG=1) when unset."""
    url = os.environ.get(URL_ENV, "")
    if url:
        return url
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {NO_SERVER}")
    pytest.skip(NO_SERVER)


def with_schema(url: str, schema: str) -> str:
    """`url` with `schema` first on the search path (where the store creates its tables)."""
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


@contextmanager
def fresh_schema() -> Iterator[str]:
    """A store URL whose tables land in a new, empty schema, dropped afterwards."""
    psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")
    url = server_url()
    schema = new_id("t").lower().replace("-", "_")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield with_schema(url, schema)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
