"""Test tiers: every test gets exactly one tier marker, chosen by the directory it lives in.

`pytest` runs every tier; `pytest -m fast` runs only the in-memory interaction tests and the unit tests
(about 80 s with `-n 2` on 2 cores, about 150 s serially: pytest-xdist is in the dev extra); `pytest -m subprocess`,
`-m thirdparty`, `-m mounts`, `-m clients`, `-m bench`, `-m acp`, `-m browser` and `-m localmodel` run one of the
others. A test that needs another tier than its directory's says so with its own marker (e.g.
`@pytest.mark.subprocess`), which then replaces the directory's.
"""

from __future__ import annotations

import compileall
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent

# The tier of each directory (or module) directly under tests/; the markers are registered in pyproject.toml.
TIERS: dict[str, str] = {
    "unit": "fast",
    "interaction": "fast",
    "subprocess": "subprocess",
    "acp": "acp",
    "thirdparty": "thirdparty",
    "mounts": "mounts",
    "clients": "clients",
    "localmodel": "localmodel",
    "browser": "browser",
    "test_bench_smoke.py": "bench",
}
TIER_MARKERS = frozenset(TIERS.values())
# A module directly in tests/ that TIERS does not name (architecture, schemas, public API) is fast.
TOP_LEVEL_TIER = "fast"


def pytest_configure(config: pytest.Config) -> None:
    # The suite spawns hundreds of server processes. An installed copy has its bytecode; a checkout on a machine
    # with PYTHONDONTWRITEBYTECODE=1 never gets it, and each spawn would compile ~100 modules from source (the
    # subprocess tier: 138 s of CPU without, 112 s with). Once, in the controller, before xdist's workers start.
    if not hasattr(config, "workerinput"):
        compileall.compile_dir(TESTS.parent / "agent_server", quiet=1)


def tier_of(path: Path) -> str:
    first = path.relative_to(TESTS).parts[0]
    if first in TIERS:
        return TIERS[first]
    if first.endswith(".py"):
        return TOP_LEVEL_TIER
    # A new directory must choose its tier, or its tests would silently join the fast one.
    raise pytest.UsageError(f"tests/{first}/ is in no test tier: add it to TIERS in tests/conftest.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        own = {mark.name for mark in item.iter_markers() if mark.name in TIER_MARKERS}
        if len(own) > 1:
            raise pytest.UsageError(f"{item.nodeid} has more than one tier marker: {sorted(own)}")
        if not own:
            item.add_marker(tier_of(item.path))


@pytest.fixture
def anyio_backend() -> str:
    # The anyio pytest plugin runs @pytest.mark.anyio tests once per backend returned here.
    return "asyncio"


@pytest.fixture(autouse=True, scope="session")
def _output_schema_validators_shared_across_clients() -> Iterator[None]:
    """Every SDK client still validates each structured result against its tool's output schema, but checks a
    schema against the JSON Schema meta-schema once per test run instead of once per client: that check is ~60x a
    validation, and with a new client in every test it was half of the fast tier's time. Keyed by the schema's
    content, so a changed schema is checked again (as the SDK's own per-session cache does)."""
    from mcp.client.session import ClientSession

    compile_once = ClientSession._output_schema_validator  # pyright: ignore[reportPrivateUsage]
    compiled: dict[str, Any] = {}

    def shared(self: ClientSession, name: str, output_schema: dict[str, Any]) -> Any:
        key = json.dumps(output_schema, sort_keys=True)
        if key not in compiled:
            compiled[key] = compile_once(self, name, output_schema)
        return compiled[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ClientSession, "_output_schema_validator", shared)
        yield
