"""Leaf module: how deep the JSON a model (or its server) sends may nest, checked before anything walks it.

Parsing, validating, copying and serialising JSON all recurse, once per level of objects and arrays:
text nested thousands deep (a model's mistake, or text planted in a file it read) raises
`RecursionError` in `json.loads`, in pydantic or in `json.dumps`, wherever it first meets one. So the
depth is measured first, without recursion: `exceeds_depth` on text (JSON strings are skipped, since
their brackets nest nothing), `deeper_than` on parsed values; `loads_bounded` parses only text that
passed. Two limits: `MAX_ARGUMENT_DEPTH` for one tool call's arguments (past it the call is not run
and the model gets an error result), `MAX_DOCUMENT_DEPTH` for a whole message of the wire (a stream
chunk, a response body), which holds arguments and a few levels of its own.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

MAX_ARGUMENT_DEPTH = 64
"""Levels of nested objects and arrays allowed in one call's arguments (the arguments object is level 1)."""
MAX_DOCUMENT_DEPTH = 256
"""Levels allowed in one wire document (far below the interpreter's recursion limit)."""

_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"?', re.DOTALL)
"""A string literal; possessive, and an unterminated one runs to the end (as the parser reads it), so the
scan never backtracks and stays linear whatever the quotes and backslashes."""
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
"""Each bracket as a signed byte: +1 opens a level, -1 closes one."""
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
"""Every other byte, deleted (UTF-8 sequences of other characters never hold an ASCII byte)."""


class NestedTooDeep(ValueError):
    """JSON text nested deeper than the limit (a ValueError, as other text that is no usable JSON)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"nested deeper than {limit} levels of objects and arrays")
        self.limit = limit


def exceeds_depth(text: str, limit: int) -> bool:
    """Whether JSON `text` nests objects and arrays more than `limit` deep (linear, no recursion). Exact for
    text whose brackets never close more than they opened (all JSON); other text may be called deep.

    The common case costs two counts: text with at most `limit` opening brackets cannot be deeper.
    Otherwise the string literals are dropped and the running depth of the brackets left is measured
    (a regular expression, `bytes.translate` and C iterators: no Python step per character).
    """
    if text.count("[") + text.count("{") <= limit:
        return False
    outside = _STRING.sub("", text) if '"' in text else text
    brackets = outside.encode("utf-8", "surrogatepass").translate(_STEPS, _NOT_BRACKETS)
    if b"\x01" * (limit + 1) in brackets:  # the usual shape of deep text: a run of openings
        return True
    return max(accumulate(memoryview(brackets).cast("b")), default=0) > limit


def loads_bounded(text: str | bytes, limit: int = MAX_DOCUMENT_DEPTH) -> Any:
    """`json.loads(text)`, once `text` is known to nest at most `limit` deep.

    Raises:
        NestedTooDeep: deeper than `limit` (nothing was parsed).
        ValueError: not JSON.
    """
    decoded = text.decode("utf-8", errors="surrogateescape") if isinstance(text, bytes) else text
    if exceeds_depth(decoded, limit):
        raise NestedTooDeep(limit)
    return json.loads(text)


def chars_left(value: Any, left: int) -> int:
    """`left` less the estimated JSON size of `value` (strings by their length, every value and key at least
    `_VALUE_CHARS`); the walk stops as soon as the result is below zero, so it is cheap however large `value`
    is (iterative: no recursion limit)."""
    stack: list[Any] = [value]
    while stack and left >= 0:
        item = stack.pop()
        if isinstance(item, str):
            left -= len(item) + 2
        elif isinstance(item, dict):
            entries: dict[Any, Any] = item  # pyright: ignore[reportUnknownVariableType]
            left -= _VALUE_CHARS * (1 + len(entries))  # counted before the walk: a huge object ends it at once
            if left >= 0:
                left -= sum(len(str(key)) for key in entries)
                stack += entries.values()
        elif isinstance(item, list | tuple):
            elements: list[Any] = list(item)  # pyright: ignore[reportUnknownArgumentType]
            left -= _VALUE_CHARS * (1 + len(elements))
            if left >= 0:
                stack += elements
    return left


_VALUE_CHARS = 16
"""What one JSON value counts at least in `chars_left` (its punctuation), so a wide structure of tiny values
spends the budget too, and the walk stays short."""


def deeper_than(value: Any, limit: int) -> bool:
    """True when `value` nests dicts and lists more than `limit` deep (iterative: no recursion limit)."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children: list[Any] = list(item.values() if isinstance(item, dict) else item)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        stack += [(child, depth + 1) for child in children if isinstance(child, dict | list)]
    return False
