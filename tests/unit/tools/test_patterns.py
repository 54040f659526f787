"""The weight of a pattern's counted repeats, read from its structure."""

from __future__ import annotations

import pytest

from agent_server.tools.patterns import repeat_weight


@pytest.mark.parametrize(
    ("pattern", "weight"),
    [
        ("hello", 1),
        (r"\d{4}-\d{2}", 4),
        ("(a{2}b{5}){3}", 15),  # the heaviest item of the group, times the group's count
        ("(?:a{100})(b{200})", 200),  # siblings do not multiply
        ("((a{100}){100}){100}", 1_000_000),
        ("x{3,}", 3),  # an open-ended repeat is a loop: its lower bound counts
        ("a{,5}", 5),
        ("x{2,7}", 7),
        (r"[{]{3}", 3),  # a class is one item
        (r"[]{9}]", 1),  # a leading ] is literal: the count is inside the class
        (r"\{1000\}", 1),  # escaped braces are literal
        ("a{3}(?#c)b{4}", 4),
        ("(?x)a{3} b{4}", 12),  # verbose: every count multiplied (an over-estimate)
        ("(a|b{10})+", 10),
    ],
)
def test_repeat_weight(pattern: str, weight: int) -> None:
    assert repeat_weight(pattern) == weight
