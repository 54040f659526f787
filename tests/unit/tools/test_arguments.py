"""Tool arguments as pydantic models: the schema a model reads and the messages a bad call gets."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import Field

from agent_server.errors import ToolFailure
from agent_server.tools.arguments import ToolArguments, input_schema, parse_arguments
from agent_server.tools.builtin import SPECS


class Sample(ToolArguments):
    name: str = Field(description="Who.")
    count: int = Field(1, ge=1, description="How many.")
    note: str | None = Field(None, description="Optional.")


class NoneRequired(ToolArguments):
    where: str = "."


def test_the_schema_is_plain_json_schema_without_titles_or_nulls() -> None:
    assert input_schema(Sample) == {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Who."},
            "count": {"type": "integer", "description": "How many.", "minimum": 1, "default": 1},
            "note": {"type": "string", "description": "Optional."},
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    assert input_schema(NoneRequired)["required"] == []


def test_read_file_schema_as_the_model_sees_it() -> None:
    path_help = "Path relative to the workspace root (an absolute path inside the workspace also works)."
    assert SPECS["read_file"].input_schema == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": path_help},
            "offset": {
                "type": "integer",
                "description": "First line to return (1-based); default 1.",
                "minimum": 1,
                "default": 1,
            },
            "limit": {
                "type": "integer",
                "description": "Maximum number of lines to return; default all.",
                "minimum": 1,
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    }


def test_valid_arguments_become_the_model_with_nulls_taken_as_left_out() -> None:
    parsed = parse_arguments("sample", Sample, {"name": "x", "count": None, "note": None})
    assert parsed == Sample(name="x", count=1, note=None)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"name": "x", "zeta": 1, "alpha": 2},
            "sample got unknown argument(s) alpha, zeta; it takes name, count, note",
        ),
        ({"zeta": 1}, "sample got unknown argument(s) zeta; it takes name, count, note"),
        ({"count": "two"}, "sample is missing the required argument 'name'"),
        ({"name": "x", "count": 2.0}, "argument 'count' must be an integer, got float"),
        ({"name": "x", "count": "2"}, "argument 'count' must be an integer, got str"),
        ({"name": "x", "note": 5}, "argument 'note' must be a string, got int"),
        ({"name": "x", "count": 0}, "argument 'count' must be at least 1, got 0"),
    ],
)
def test_the_first_problem_is_named_unknown_then_missing_then_values(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolFailure) as caught:
        parse_arguments("sample", Sample, arguments)
    assert caught.value.message == message
