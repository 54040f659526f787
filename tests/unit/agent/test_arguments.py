"""The nesting bound on a model's tool-call arguments."""

from __future__ import annotations

from typing import Any

from agent_server.agent.arguments import MAX_ARGUMENT_DEPTH, bound_argument_nesting
from agent_server.types import ToolCall


def nested(levels: int) -> dict[str, Any]:
    """An arguments object `levels` deep, alternating objects and arrays."""
    value: Any = "leaf"
    for level in range(levels - 1):
        value = {"k": value} if level % 2 else [value]
    return {"k": value}


def test_arguments_at_the_limit_pass_unchanged() -> None:
    call = ToolCall(id="c1", name="t", arguments=nested(MAX_ARGUMENT_DEPTH))
    assert bound_argument_nesting([call]) == [call]


def test_deeper_arguments_are_emptied_and_marked_invalid() -> None:
    ok = ToolCall(id="c1", name="t", arguments={"path": "a", "list": [1, {"x": 2}]})
    deep = ToolCall(id="c2", name="t", arguments=nested(MAX_ARGUMENT_DEPTH + 1))
    first, second = bound_argument_nesting([ok, deep])
    assert first == ok
    assert (second.id, second.arguments) == ("c2", {})
    assert second.arguments_error is not None and f"deeper than {MAX_ARGUMENT_DEPTH}" in second.arguments_error


def test_very_deep_arguments_need_no_recursion() -> None:
    (call,) = bound_argument_nesting([ToolCall(id="c", name="t", arguments=nested(100_000))])
    assert call.arguments_error is not None
