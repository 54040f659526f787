"""Leaf module: what an id is, checked where ids enter (`AgentRuntime`, for every front door and store).

Ids are the server's own: sessions and turns `<prefix>_<16 hex digits>` (`types.new_id`), MCP tasks 32
URL-safe base64 characters; a client only passes them back (or `"new"` for a fresh session). So an id is
1 to `ID_MAX_CHARS` ASCII letters, digits, `_` or `-`. Anything else (a NUL, a control character, a
space, a megabyte of text) can name nothing stored and is refused as `invalid_argument` before any store
sees it: PostgreSQL cannot hold a NUL in text, and an absurd length would be sent to every store query.
"""

from __future__ import annotations

import re

from agent_server.errors import InvalidArgument

ID_MAX_CHARS = 128
_ID = re.compile(rf"[A-Za-z0-9_-]{{1,{ID_MAX_CHARS}}}")
_SHOWN_CHARS = 40


def check_ids(**ids: str | None) -> None:
    """Raise `InvalidArgument` naming the first of `ids` (name=value; None: not given) that is no id."""
    for name, value in ids.items():
        if value is not None and _ID.fullmatch(value) is None:
            raise InvalidArgument(f"malformed {name} {_shown(value)}: {GRAMMAR}")


GRAMMAR = f"an id is 1 to {ID_MAX_CHARS} ASCII letters, digits, '_' or '-'"


def _shown(value: str) -> str:
    """The value as a short ASCII literal: control, zero-width and other characters escaped, cut."""
    head = ascii(value[:_SHOWN_CHARS])
    return head if len(value) <= _SHOWN_CHARS else f"{head}... ({len(value)} characters)"
