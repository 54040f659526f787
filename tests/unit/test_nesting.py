"""The depth check that runs before any JSON a model sends is parsed (`agent_server.nesting`)."""

from __future__ import annotations

import json
import random

import pytest

from agent_server.nesting import MAX_DOCUMENT_DEPTH, NestedTooDeep, exceeds_depth, loads_bounded


def reference_depth(text: str) -> int:
    """The deepest nesting of `text` by a plain character walk (strings skipped as the JSON parser reads them);
    -1 when more brackets close than opened at some point (no JSON, whatever follows)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
            if depth < 0:
                return -1
    return deepest


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("[" * 64 + "]" * 64, 64),
        ("[" * 65 + "]" * 65, 65),
        ("[[],[[],[[]]]]" + "", 4),
        ("[[]," * 70 + "]" * 70, 71),  # deep without a long run of openings
        (json.dumps({"code": "{[" * 1000}), 1),  # brackets in strings nest nothing
        (json.dumps({"q": 'say "[[[[" \\ ok', "n": [[[1]]]}), 4),
        ('["unterminated [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[', 1),
        ('{"é": ["ü", {"\\ud83d\\ude00": [' + "[" * 70 + "]" * 70 + "]}]}", 74),
    ],
)
def test_the_depth_is_measured_without_parsing(text: str, depth: int) -> None:
    assert reference_depth(text) == depth
    assert exceeds_depth(text, depth) is False
    assert exceeds_depth(text, depth - 1) is True


def test_random_texts_agree_with_a_character_walk() -> None:
    rng = random.Random(7)
    alphabet = '[[{{]}"\\a,: é'
    checked = 0
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 200)))
        depth = reference_depth(text)
        if depth < 0:
            continue  # closes more than it opened: no JSON, and the check may call it deep
        checked += 1
        for limit in (0, 1, max(0, depth - 1), depth):
            assert exceeds_depth(text, limit) is (depth > limit), (text, limit)
    assert checked > 300


def test_loads_bounded_parses_what_fits_and_refuses_the_rest_unparsed() -> None:
    document = {"choices": [{"delta": {"tool_calls": [{"function": {"arguments": '{"a": [1]}'}}]}}]}
    assert loads_bounded(json.dumps(document)) == document
    assert loads_bounded(json.dumps(document).encode()) == document
    with pytest.raises(NestedTooDeep, match=f"nested deeper than {MAX_DOCUMENT_DEPTH} levels"):
        loads_bounded(b"[" * 1_000_000 + b"]" * 1_000_000)
    with pytest.raises(ValueError):
        loads_bounded("{not json")
