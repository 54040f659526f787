"""Tool arguments declared as pydantic models: the JSON Schema the model sees and the validation from one source.

A tool declares its arguments as a `ToolArguments` subclass (strict types, no extra keys). `input_schema`
turns it into the plain schema offered to the model (no titles, no nulls: `X | None` shows as `X`), and
`parse_arguments` validates what the model sent into an instance. A null is taken as the argument left
out, since models often send null for an optional argument. A problem becomes one `ToolFailure` whose
message names the argument and says what is wrong: unknown arguments first, then a missing one, then
a value of the wrong type or out of range.
"""

from typing import Any, TypeVar

import pydantic
from pydantic import BaseModel, ConfigDict
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import ErrorDetails, core_schema

from agent_server.errors import ToolFailure

_ORDER = {"extra_forbidden": 0, "missing": 1}
"""Which problem is reported first; any other kind comes after these, in field order."""


class ToolArguments(BaseModel):
    """The arguments of one tool. Strict: `"10"` is not an integer and `true` is not 1."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


Args = TypeVar("Args", bound=ToolArguments)


class _ToolSchema(GenerateJsonSchema):
    """The schema a model reads: no titles, and an optional argument is its type (a null means left out)."""

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        generated = super().default_schema(schema)
        if generated.get("default", ...) is None:
            del generated["default"]
        return generated

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def input_schema(model: type[ToolArguments]) -> dict[str, Any]:
    """The JSON Schema of `model`'s arguments, as offered to the agent's model."""
    schema = model.model_json_schema(schema_generator=_ToolSchema)
    schema.pop("title", None)
    schema.pop("description", None)
    return {**schema, "required": schema.get("required", [])}


def parse_arguments(tool: str, model: type[Args], arguments: dict[str, Any]) -> Args:
    """`arguments` (nulls dropped) as an instance of `model`; ToolFailure naming the first problem."""
    given = {key: value for key, value in arguments.items() if value is not None}
    try:
        return model.model_validate(given)
    except pydantic.ValidationError as exc:
        raise ToolFailure(_describe(tool, model, exc.errors(include_url=False))) from None


def _describe(tool: str, model: type[ToolArguments], errors: list[ErrorDetails]) -> str:
    errors = sorted(errors, key=lambda error: _ORDER.get(error["type"], len(_ORDER)))
    first = errors[0]
    key = str(first["loc"][0]) if first["loc"] else ""
    if first["type"] == "extra_forbidden":
        unknown = sorted(str(error["loc"][0]) for error in errors if error["type"] == "extra_forbidden")
        return f"{tool} got unknown argument(s) {', '.join(unknown)}; it takes {', '.join(model.model_fields)}"
    if first["type"] == "missing":
        return f"{tool} is missing the required argument {key!r}"
    got = type(first["input"]).__name__
    if first["type"] == "string_type":
        return f"argument {key!r} must be a string, got {got}"
    if first["type"] == "int_type":
        return f"argument {key!r} must be an integer, got {got}"
    if first["type"] == "greater_than_equal":
        return f"argument {key!r} must be at least {first.get('ctx', {}).get('ge')}, got {first['input']}"
    return f"argument {key!r}: {first['msg']}"
