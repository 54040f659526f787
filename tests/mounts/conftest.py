"""The real reference MCP servers from npm, installed by `npm ci --prefix tests/node`.

Without `tests/node/node_modules` (or `node`) these tests are skipped, unless `AGENT_SERVER_REQUIRE_NODE=1`
(CI sets it), in which case they fail.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

NODE_MODULES = Path(__file__).resolve().parents[1] / "node" / "node_modules"
PACKAGES = NODE_MODULES / "@modelcontextprotocol"


def _server(package: str) -> Path:
    entry = PACKAGES / package / "dist" / "index.js"
    missing = [what for what, ok in (("node", shutil.which("node")), (str(entry), entry.is_file())) if not ok]
    if missing:
        message = f"missing {', '.join(missing)}: run `npm ci --prefix tests/node`"
        if os.environ.get("AGENT_SERVER_REQUIRE_NODE") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return entry


@pytest.fixture
def filesystem_server() -> Path:
    return _server("server-filesystem")


@pytest.fixture
def everything_server() -> Path:
    return _server("server-everything")
