"""The input schemas the HTTP door hands the SDK for its `Mcp-Param-*` header check."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.shared.inbound import validate_mcp_param_headers

from agent_server.server.listing import declares_headers, input_schema, wire_tools

ANNOTATED: dict[str, Any] = {
    "type": "object",
    "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
}


@pytest.mark.parametrize("tool", wire_tools(), ids=lambda tool: tool.name)
def test_a_tool_declaring_no_header_parameter_is_not_checked_as_the_sdk_would_refuse_nothing(tool: Any) -> None:
    assert not declares_headers(tool.input_schema)
    assert input_schema(tool.name) is None  # the SDK skips its two walks of the schema
    stray = {"mcp-param-prompt": "other", "mcp-param-region": "eu"}
    assert validate_mcp_param_headers(tool.input_schema, {"prompt": "hi"}, stray) is None


def test_a_header_parameter_is_found_wherever_it_is_declared() -> None:
    assert declares_headers(ANNOTATED)
    assert declares_headers({"anyOf": [{"type": "null"}, ANNOTATED]})
    assert declares_headers({"$defs": {"Where": ANNOTATED}})
    assert not declares_headers({"type": "object", "properties": {"region": {"type": "string"}}})
    assert validate_mcp_param_headers(ANNOTATED, {"region": "us"}, {"mcp-param-region": "eu"}) is not None
