"""Bounds on the tool-call arguments a model sends, applied once where its calls enter the loop.

Arguments nested very deep (a model's mistake, or text planted in a file it read) cannot be
serialised into the turn's record or history, so they would fail the whole turn. A call nested
deeper than `MAX_ARGUMENT_DEPTH` is not run: the model gets an error result for it instead (the
`arguments_error` path, like arguments that are not valid JSON), and the turn goes on.
"""

from __future__ import annotations

from agent_server.nesting import MAX_ARGUMENT_DEPTH, chars_left, deeper_than
from agent_server.types import ToolCall

__all__ = ["LOOP_ARGUMENTS_MAX_CHARS", "MAX_ARGUMENT_DEPTH", "bound_argument_nesting", "calls_fit"]

LOOP_ARGUMENTS_MAX_CHARS = 32_768
"""The most characters of arguments (estimated, `nesting.chars_left`) whose checks (`bound_argument_nesting`,
`window.fit_calls`) run on the event loop; a larger response's run in a worker thread, so a model's huge or
crafted arguments never hold the loop (the rule: never more than 1 ms)."""


def calls_fit(calls: list[ToolCall], max_chars: int) -> bool:
    """Whether the calls' arguments are estimated at most `max_chars` characters (a walk that stops early)."""
    left = max_chars
    for call in calls:
        left = chars_left(call.arguments, left)
        if left < 0:
            return False
    return True


def bound_argument_nesting(calls: list[ToolCall]) -> list[ToolCall]:
    """`calls`, with each call nested deeper than `MAX_ARGUMENT_DEPTH` emptied and marked invalid."""
    return [_bounded(call) for call in calls]


def _bounded(call: ToolCall) -> ToolCall:
    if not deeper_than(call.arguments, MAX_ARGUMENT_DEPTH):
        return call
    error = f"arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels of objects and arrays"
    return call.model_copy(update={"arguments": {}, "arguments_error": error})
