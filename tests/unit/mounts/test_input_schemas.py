"""The input-schema check of mounted tools, on schemas the wire cannot even carry whole."""

from __future__ import annotations

from typing import Any

from agent_server.mounts.input_schemas import schema_problem


def _nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    inner = schema
    for _ in range(depth):
        inner["properties"] = {"a": {"type": "object"}}
        inner = inner["properties"]["a"]
    return schema


def test_a_schema_that_cannot_be_checked_is_a_problem_not_an_exception() -> None:
    assert (schema_problem({"type": "object", "$schema": ["not", "a", "string"]}) or "").startswith(
        "its input schema cannot be checked (TypeError"
    )
    assert "cannot be checked (RecursionError" in (schema_problem(_nested(5000)) or "")


def test_valid_schemas_have_no_problem() -> None:
    assert schema_problem({"type": "object", "properties": {"q": {"type": "string", "pattern": "^a+$"}}}) is None
    assert schema_problem(_nested(20)) is None
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "required": ["q"]}
    assert schema_problem(draft7) is None
