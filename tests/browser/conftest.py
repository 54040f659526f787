"""The browser tier: the web view in headless Chromium (Debian's `chromium`), driven by Playwright's Python package.

No browser is downloaded: Playwright launches `/usr/bin/chromium` (`CHROMIUM`). Without it or without Playwright
these tests skip, unless AGENT_SERVER_REQUIRE_BROWSER=1 (CI), where they fail instead. One browser per module.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("AGENT_SERVER_CHROMIUM", "/usr/bin/chromium"))
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REQUIRED = os.environ.get("AGENT_SERVER_REQUIRE_BROWSER") == "1"


def _missing() -> str | None:
    if importlib.util.find_spec("playwright") is None:
        return "Playwright is not installed (pip install -e '.[dev]')"
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing (apt-get install chromium)"
    return None


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # Playwright's async API runs on asyncio


@pytest.fixture(scope="module")
async def browser(anyio_backend: str) -> AsyncIterator[Any]:
    missing = _missing()
    if missing is not None:
        if REQUIRED:
            pytest.fail(f"AGENT_SERVER_REQUIRE_BROWSER=1 but {missing}")
        pytest.skip(missing)
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield launched
        finally:
            await launched.close()
