"""The READMEs say how many tools the server offers ("twelve tools"): the number must be the tool table's."""

from __future__ import annotations

import re
from pathlib import Path

from agent_server.server.tool_table import NAMES

ROOT = Path(__file__).resolve().parents[1]
NUMBERS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]
NUMBERS += ["thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"]
COUNTED = re.compile(rf"\b(?:same|its|with|all|the) ({'|'.join(NUMBERS)}|\d+) tools\b", re.IGNORECASE)
"""A count of the server's tools ("the same twelve tools", "with its twelve tools"), not of others."""


def test_every_tool_count_in_the_readmes_is_the_tool_tables() -> None:
    said: dict[str, list[str]] = {}
    for readme in (ROOT / "README.md", ROOT / "clients" / "README.md"):
        for match in COUNTED.finditer(readme.read_text()):
            said.setdefault(match.group(1).lower(), []).append(readme.name)
    expected = NUMBERS[len(NAMES)] if len(NAMES) < len(NUMBERS) else str(len(NAMES))
    assert said, "no README says how many tools the server offers"
    assert set(said) == {expected}, f"the tool table has {len(NAMES)} tools; the READMEs say {said}"
