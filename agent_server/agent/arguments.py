"""Bounds on the tool-call arguments a model sends, applied once where its calls enter the loop.

Arguments nested very deep (a model's mistake, or text planted in a file it read) cannot be
serialised into the turn's record or history, so they would fail the whole turn. A call nested
deeper than `MAX_ARGUMENT_DEPTH` is not run: the model gets an error result for it instead (the
`arguments_error` path, like arguments that are not valid JSON), and the turn goes on.
"""

from __future__ import annotations

from typing import Any

from agent_server.types import ToolCall

MAX_ARGUMENT_DEPTH = 64
"""Levels of nested objects and arrays allowed in one call's arguments (the arguments object is level 1)."""


def bound_argument_nesting(calls: list[ToolCall]) -> list[ToolCall]:
    """`calls`, with each call nested deeper than `MAX_ARGUMENT_DEPTH` emptied and marked invalid."""
    return [_bounded(call) for call in calls]


def _bounded(call: ToolCall) -> ToolCall:
    if not _deeper_than(call.arguments, MAX_ARGUMENT_DEPTH):
        return call
    error = f"arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels of objects and arrays"
    return call.model_copy(update={"arguments": {}, "arguments_error": error})


def _deeper_than(value: Any, limit: int) -> bool:
    """True when `value` nests objects and arrays more than `limit` deep (iterative: no recursion limit)."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children: list[Any] = list(item.values() if isinstance(item, dict) else item)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        stack += [(child, depth + 1) for child in children if isinstance(child, dict | list)]
    return False
