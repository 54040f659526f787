"""The `tools/list` answer, read from `tools.json` beside this module.

`python -m agent_server.server.schemas` writes it from the models together with `schemas/` (a test
fails on drift). Reading a file instead of building 18 JSON Schemas keeps the start path light.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import mcp_types as types

LISTING = Path(__file__).with_name("tools.json")


@cache
def wire_tools() -> list[types.Tool]:
    return [types.Tool.model_validate(tool) for tool in json.loads(LISTING.read_text(encoding="utf-8"))]


@cache
def tool_names() -> frozenset[str]:
    return frozenset(tool.name for tool in wire_tools())
