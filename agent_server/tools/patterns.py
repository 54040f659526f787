"""Compiling a regular expression chosen by the model, within bounds.

The `regex` package expands counted repeats when it compiles, so `a{4294967294}` or
`(?:x{65535}){65535}` would take gigabytes and minutes before any match starts. A pattern is
refused, with an error naming the limit, when it is longer than `MAX_PATTERN_CHARS` or when its
counted repeats, multiplied through their nesting, allow more than `MAX_REPEAT_WEIGHT` copies of
anything. Open-ended repeats (`*`, `+`, `{m,}`) are loops, not copies: only their lower bound counts.
The weight is read from the pattern's structure (groups, classes, escapes, `(?#...)` comments); with
inline flags that change how the pattern reads (verbose `x`, version `V1`) every count is multiplied,
which can only over-estimate.
"""

from __future__ import annotations

import regex

from agent_server.errors import ToolFailure

MAX_PATTERN_CHARS = 2000
MAX_REPEAT_WEIGHT = 10_000
_COUNTED = regex.compile(r"\{(\d+)(?:,(\d*))?\}|\{,(\d+)\}")
_REREADING_FLAGS = regex.compile(r"\(\?[a-zA-Z0-9^-]*[xV]")


def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """The compiled pattern; ToolFailure when it is too long, repeats too much, or is invalid."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ToolFailure(f"the pattern is {len(pattern)} characters long; the limit is {MAX_PATTERN_CHARS}")
    weight = repeat_weight(pattern)
    if weight > MAX_REPEAT_WEIGHT:
        raise ToolFailure(
            f"the pattern's counted repeats allow {weight} copies (nested counts multiply); "
            f"the limit is {MAX_REPEAT_WEIGHT}: use * or + instead of large {{m,n}} counts"
        )
    try:
        return regex.compile(pattern)
    except regex.error as exc:
        raise ToolFailure(f"invalid regex {pattern!r}: {exc}") from exc  # "missing ) at position 9"


def repeat_weight(pattern: str) -> int:
    """The largest product of counted-repeat bounds along any nesting of groups (1 without counts)."""
    if _REREADING_FLAGS.search(pattern):
        weight = 1
        for counted in _COUNTED.finditer(pattern):
            weight *= max(_bound(counted), 1)
        return weight
    return _structural_weight(pattern)


def _structural_weight(pattern: str) -> int:
    stack = [1]  # the heaviest item seen so far in each open group
    last = 1  # the weight of the item just before the current position (what a quantifier applies to)
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i, last = i + 2, 1
            continue
        if char == "[":
            i, last = _skip_class(pattern, i), 1
            continue
        if pattern.startswith("(?#", i):
            end = pattern.find(")", i)  # a comment runs to its ) or to the end
            i, last = (len(pattern) if end == -1 else end + 1), 1
            continue
        if char == "(":
            stack.append(1)
            last = 1
        elif char == ")" and len(stack) > 1:
            last = stack.pop()
        elif char == "{" and (counted := _COUNTED.match(pattern, i)) is not None:
            last *= _bound(counted)
            i = counted.end()
            stack[-1] = max(stack[-1], last)
            continue
        else:
            last = 1
        stack[-1] = max(stack[-1], last)
        i += 1
    return max(stack)


def _bound(counted: regex.Match[str]) -> int:
    low, high, only_high = counted.group(1), counted.group(2), counted.group(3)
    if only_high is not None:
        return int(only_high)
    if high:  # {m,n}
        return max(int(low), int(high))
    return int(low)  # {m} and the open-ended {m,}


def _skip_class(pattern: str, start: int) -> int:
    """The index just past the character class opening at `start` (the pattern's end if it never closes)."""
    i = start + 1
    if i < len(pattern) and pattern[i] == "^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":  # a leading ] is literal
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1
