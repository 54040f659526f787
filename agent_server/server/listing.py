"""The `tools/list` answer, read from `tools.json` beside this module.

`python -m agent_server.server.schemas` writes it from the models together with `schemas/` (a test
fails on drift). Reading a file instead of building 18 JSON Schemas keeps the start path light.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import mcp_types as types

LISTING = Path(__file__).with_name("tools.json")


@cache
def wire_tools() -> list[types.Tool]:
    return [types.Tool.model_validate(tool) for tool in json.loads(LISTING.read_text(encoding="utf-8"))]


@cache
def tool_names() -> frozenset[str]:
    return frozenset(tool.name for tool in wire_tools())


@cache
def _input_schemas() -> dict[str, Mapping[str, Any]]:
    return {tool.name: tool.input_schema for tool in wire_tools()}


def input_schema(name: str) -> Mapping[str, Any] | None:
    """A tool's `inputSchema` by name (None: no such tool). The SDK checks a 2026-07-28 HTTP call's `Mcp-Param-*`
    headers against it; without this lookup it would run the whole `tools/list` for every `tools/call`."""
    return _input_schemas().get(name)
