"""The `tools/list` answer, read from `tools.json` beside this module.

`python -m agent_server.server.schemas` writes it from the models together with `schemas/` (a test
fails on drift). Reading a file instead of building 18 JSON Schemas keeps the start path light.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, cast

import mcp_types as types
from mcp.shared.inbound import X_MCP_HEADER_KEY

LISTING = Path(__file__).with_name("tools.json")


@cache
def _listing() -> list[dict[str, Any]]:
    return json.loads(LISTING.read_text(encoding="utf-8"))


@cache
def wire_tools() -> list[types.Tool]:
    return [types.Tool.model_validate(tool) for tool in _listing()]


@cache
def tool_names() -> frozenset[str]:
    """The served tools' names, from the file itself: a first `tools/call` before any `tools/list` need not
    validate the whole listing into models (about 1 ms)."""
    return frozenset(str(tool["name"]) for tool in _listing())


@cache
def _header_schemas() -> dict[str, Mapping[str, Any]]:
    return {tool.name: tool.input_schema for tool in wire_tools() if declares_headers(tool.input_schema)}


def input_schema(name: str) -> Mapping[str, Any] | None:
    """The `inputSchema` the SDK checks a 2026-07-28 HTTP call's `Mcp-Param-*` headers against (without this lookup
    it would run the whole `tools/list` for every `tools/call`). None for a tool whose schema declares no header
    parameter (`x-mcp-header`), as for no such tool: against such a schema the check can refuse nothing, and it
    walks the schema twice (about 80 us for `run_turn`'s, on every call)."""
    return _header_schemas().get(name)


def declares_headers(schema: object) -> bool:
    """Whether `x-mcp-header` is a key anywhere in `schema` (a superset of where the SDK honours it)."""
    if isinstance(schema, dict):
        entries = cast(dict[str, Any], schema)
        return X_MCP_HEADER_KEY in entries or any(declares_headers(value) for value in entries.values())
    if isinstance(schema, list):
        return any(declares_headers(item) for item in cast(list[Any], schema))
    return False
