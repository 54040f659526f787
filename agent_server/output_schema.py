"""Leaf module: a turn's output schema (`run_turn(output_schema=...)`, an agent's `output_schema`), checked and
applied.

A client sends the schema, so it is bounded before anything walks it: at most `MAX_SCHEMA_BYTES` of JSON and
`MAX_SCHEMA_DEPTH` levels of objects and arrays (`agent_server.nesting`), and it must be a valid JSON Schema (its
`$schema`'s draft, else 2020-12). No reference is fetched: a `$ref` reaches only the schema itself. The model's
answer is checked with the `jsonschema` library (already a dependency); `pattern` and `patternProperties` are
matched with the `regex` module under a time limit, so that a hostile pattern cannot hold a thread. Both
`jsonschema` and `regex` are imported on first use: a turn without a schema never loads them.

An answer is read as JSON after one surrounding Markdown code fence (```json ... ```) is dropped, since models
add one even when told not to.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any, cast

from agent_server.nesting import MAX_DOCUMENT_DEPTH, deeper_than, loads_bounded

MAX_SCHEMA_BYTES = 64 * 1024
MAX_SCHEMA_DEPTH = 32
PATTERN_TIMEOUT_S = 1.0
"""The longest one `pattern` may take to match one string of the answer."""
MAX_PROBLEM_CHARS = 600
"""A validation message keeps at most this much (it quotes the answer, which may be long)."""
VALIDATORS_KEPT = 16
_FENCE = re.compile(r"\A\s*```[A-Za-z0-9_-]*\s*\n(?P<body>.*?)\n?\s*```\s*\Z", re.DOTALL)


def check_output_schema(schema: Any) -> dict[str, Any]:
    """`schema` if it is a bounded (`bound_output_schema`), valid (`validate_output_schema`) JSON Schema object.

    Blocking for a large schema: on the event loop, bound it there and validate it in a worker thread.

    Raises:
        ValueError: it is not an object, is too large or too deep, or is no valid JSON Schema (the message says
            what is wrong).
    """
    return validate_output_schema(bound_output_schema(schema))


def bound_output_schema(schema: Any) -> dict[str, Any]:
    """`schema` if it is an object within `MAX_SCHEMA_DEPTH` and `MAX_SCHEMA_BYTES` (cheap: no schema check).

    Raises:
        ValueError: it is not, and why.
    """
    if not isinstance(schema, dict):
        raise ValueError("output_schema must be a JSON Schema object")
    if deeper_than(schema, MAX_SCHEMA_DEPTH):
        raise ValueError(f"output_schema nests deeper than {MAX_SCHEMA_DEPTH} levels")
    try:
        size = len(json.dumps(schema, ensure_ascii=False).encode())
    except (TypeError, ValueError) as exc:
        raise ValueError(f"output_schema is not JSON: {exc}") from None
    if size > MAX_SCHEMA_BYTES:
        raise ValueError(f"output_schema is {size} bytes of JSON; at most {MAX_SCHEMA_BYTES} are allowed")
    bounded: dict[str, Any] = schema  # pyright: ignore[reportUnknownVariableType]
    return bounded


def validate_output_schema(checked: dict[str, Any]) -> dict[str, Any]:
    """`checked` if it is a valid JSON Schema of its `$schema`'s draft (else 2020-12). Blocking: the library's
    first import and the meta-schema check take milliseconds.

    Raises:
        ValueError: it is not, and why.
    """
    from jsonschema import SchemaError, validators

    try:
        validators.validator_for(checked, default=_default_validator()).check_schema(checked)
    except SchemaError as exc:
        raise ValueError(f"output_schema is not a valid JSON Schema: {_cut(exc.message)}") from None
    return checked


def schema_instructions(schema: dict[str, Any]) -> str:
    """What the model is told, in its system prompt, about the answer's form."""
    return (
        "Your final answer must be a single JSON value, with no other text and no code fence, valid against "
        "this JSON Schema:\n" + json.dumps(schema, ensure_ascii=False, indent=1)
    )


def repair_prompt(problem: str) -> str:
    """The message that asks the model, once, to correct an answer that did not match the schema."""
    return (
        f"Your final answer does not match the required output schema: {problem}\n"
        "Answer again with only the corrected JSON value."
    )


def parse_answer(text: str, schema: dict[str, Any]) -> tuple[Any, str | None]:
    """(the answer's JSON value, None) when `text` is valid against `schema`, else (None, what is wrong).

    Blocking (a pattern may take up to `PATTERN_TIMEOUT_S`): call it in a worker thread.
    """
    fenced = _FENCE.match(text)
    body = fenced.group("body") if fenced else text
    try:
        value = loads_bounded(body.strip(), MAX_DOCUMENT_DEPTH)
    except ValueError as exc:
        return None, _cut(f"the answer is not JSON ({exc})")
    validator = _validator_class(json.dumps(schema, sort_keys=True))
    try:
        error = _best(validator(schema).iter_errors(value))
    except _PatternTimeout as exc:
        return None, str(exc)
    if error is None:
        return value, None
    return None, _cut(error)


class _PatternTimeout(Exception):
    pass


def _best(errors: Iterator[Any]) -> str | None:
    from jsonschema import exceptions

    error: Any = cast(Any, exceptions).best_match(errors)  # its result is untyped in the library
    if error is None:
        return None
    where, message = str(error.json_path), str(error.message)
    return f"{message} (at {where})" if where != "$" else message


def _cut(text: str) -> str:
    return text if len(text) <= MAX_PROBLEM_CHARS else text[: MAX_PROBLEM_CHARS - 1] + "…"


def _default_validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator


@lru_cache(maxsize=VALIDATORS_KEPT)
def _validator_class(schema_json: str) -> Any:
    """The validator class for the schema's draft, its pattern keywords matched with a time limit (the latest few
    kept, by schema text: a turn checks one schema, at most twice, and callers send any number)."""
    from jsonschema import validators

    base: Any = validators.validator_for(json.loads(schema_json), default=_default_validator())
    keywords = {"pattern": _pattern, "patternProperties": _pattern_properties}
    return validators.extend(base, keywords)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]


def _search(pattern: str, text: str) -> bool:
    import regex

    try:
        return regex.search(pattern, text, timeout=PATTERN_TIMEOUT_S) is not None
    except TimeoutError:
        raise _PatternTimeout(f"the pattern {pattern!r} took too long to match the answer") from None
    except regex.error:
        return True  # a pattern `regex` cannot read constrains nothing (check_schema accepted it)


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema import ValidationError

    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)
