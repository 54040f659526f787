"""Checking a mounted tool's `inputSchema` before it is offered to the model.

An OpenAI-compatible endpoint that validates tool schemas rejects the *whole* request when one of
them is invalid, so one broken mounted tool would fail every turn. A schema must be valid under its
JSON Schema meta-schema (its `$schema` dialect, by default 2020-12); otherwise the tool is dropped
with the reason this module gives. (The top-level `"type": "object"` is already enforced by the SDK.)
"""

from __future__ import annotations

from typing import Any

from jsonschema import SchemaError
from jsonschema.validators import validator_for

_MAX_REASON_CHARS = 300


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why `schema` cannot be a tool's input schema, or None when it can."""
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "the top level"
        return f"its input schema is not valid JSON Schema (at {where}: {_clip(exc.message)})"
    except Exception as exc:  # a `$schema` that is not a string, nesting past the recursion limit, ...
        return f"its input schema cannot be checked ({type(exc).__name__}: {_clip(str(exc))})"
    return None


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_REASON_CHARS else text[:_MAX_REASON_CHARS] + "…"
