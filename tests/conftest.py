"""Test tiers: every test gets exactly one tier marker, chosen by the directory it lives in.

`pytest` runs every tier; `pytest -m fast` runs only the in-memory interaction tests and the unit tests
(under a minute on 2 cores); `pytest -m subprocess`, `-m thirdparty`, `-m mounts`, `-m clients`,
`-m bench`, `-m acp`, `-m browser` and `-m localmodel` run one of the others. A test that needs another tier
than its directory's says so with its own marker (e.g. `@pytest.mark.subprocess`), which then replaces the directory's.
"""

from __future__ import annotations

from pathlib import Path

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
