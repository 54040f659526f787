"""Pieces the session stores share: opaque paging cursors, session titles, interrupted records, stored JSON."""

from __future__ import annotations

import base64
import binascii
import json

from pydantic import BaseModel

from agent_server.errors import INTERRUPTED, InvalidArgument, StoreError
from agent_server.types import ErrorInfo, Message, StoredMessage, TurnRecord, title_from, utc_now

INTERRUPTED_MESSAGE = "the server process running this turn exited before it finished"


def encode_cursor(kind: str, ordinal: int) -> str:
    """An opaque cursor pointing after the item with `ordinal` in a `kind` listing."""
    return base64.urlsafe_b64encode(f"{kind}:{ordinal}".encode()).decode().rstrip("=")


def decode_cursor(kind: str, cursor: str | None) -> int | None:
    """The ordinal inside a cursor made by `encode_cursor(kind, ...)`; InvalidArgument if malformed."""
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        prefix, _, number = raw.partition(":")
        if prefix != kind or not number.isdigit():
            raise ValueError(raw)
        return int(number)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidArgument(f"malformed {kind} cursor {cursor!r}") from None


def check_limit(limit: int) -> None:
    if limit < 1:
        raise InvalidArgument(f"limit must be at least 1, got {limit}")


def first_title(record: TurnRecord) -> str | None:
    """The title a turn gives its session while the session has none (`UNTITLED`): its prompt's start; none for
    a slash command's turn."""
    return None if record.command is not None else title_from(record.prompt)


def fork_title(old_title: str, title: str | None) -> str:
    return f"{old_title} (fork)" if title is None else title


def fork_running_message(turn_id: str) -> str:
    return f"turn {turn_id!r} is still running: fork at an earlier turn, or once it has finished"


def interrupted(record: TurnRecord) -> TurnRecord:
    """The record of a turn whose server process died while it was running."""
    return record.model_copy(
        update={
            "status": "interrupted",
            "finished_at": record.finished_at or utc_now(),
            "error": ErrorInfo(type=INTERRUPTED, message=INTERRUPTED_MESSAGE),
        }
    )


def dump(model: BaseModel) -> str:
    """The model as stored JSON; StoreError when it cannot be serialised (e.g. nested too deep)."""
    try:
        return model.model_dump_json(by_alias=True)  # compact UTF-8 JSON in one pass (pydantic-core)
    except (ValueError, TypeError, RecursionError) as exc:
        # pydantic-core reports text UTF-8 cannot hold (a lone surrogate) inside its own error's message
        what = "encode" if "UnicodeEncodeError" in str(exc) else "serialise"
        raise StoreError(f"session store: cannot {what} the {type(model).__name__}: {exc}") from exc


def stored_message(seq: int, turn_id: str | None, text: str) -> StoredMessage:
    """A history message from its stored row (its JSON parsed and validated)."""
    return StoredMessage(seq=seq, turn_id=turn_id, message=Message.model_validate(json.loads(text)))
