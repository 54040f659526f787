"""The id grammar (`agent_server.ids`): every id the server makes fits it, and what does not is refused clearly."""

from __future__ import annotations

import secrets

import pytest

from agent_server.errors import InvalidArgument
from agent_server.ids import ID_MAX_CHARS, check_ids
from agent_server.server.tasks.registry import TASK_ID_BYTES
from agent_server.types import new_id


def test_every_id_the_server_makes_is_well_formed() -> None:
    made = [new_id(prefix) for prefix in ("ses", "turn", "trace", "compact", "call")]
    made += [secrets.token_urlsafe(TASK_ID_BYTES) for _ in range(200)]  # MCP task ids, '-' and '_' included
    for an_id in [*made, "new"]:
        check_ids(session_id=an_id)
    assert max(len(i) for i in made) <= ID_MAX_CHARS


@pytest.mark.parametrize(
    ("bad", "shown"),
    [
        ("ses_\x00x", r"'ses_\x00x'"),
        ("a\u202eb", r"'a\u202eb'"),  # a bidi override is shown escaped, never applied
        ("x" * 1_000_000, "(1000000 characters)"),
        ("", "''"),
    ],
    ids=["nul", "bidi", "a-megabyte", "empty"],
)
def test_a_malformed_id_is_named_escaped_and_cut(bad: str, shown: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        check_ids(session_id="ses_fine", turn_id=bad)
    message = caught.value.message
    assert message.startswith("malformed turn_id ") and shown in message and len(message) < 200
    assert message.isascii()


def test_absent_ids_are_not_checked() -> None:
    check_ids(session_id=None, turn_id=None)
