"""The one place where exceptions and failed turns become ACP JSON-RPC errors.

Codes: an unknown session is `resource_not_found` (-32002); an argument the client must fix is
`invalid_params` (-32602); anything else (the store, a bug) is `internal_error` (-32603) with a
message that names no internals (the details go to the log). A failed or timed-out turn is an
`internal_error` whose `data.turn` is the turn's record (DESIGN 3.9), and whose message is the
turn's status and error (`[turn failed] model_error: provider down`).
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any

from acp import RequestError

from agent_server.errors import INTERNAL_ERROR, AgentServerError, ConfigError, InvalidArgument, NotFound
from agent_server.types import TurnRecord

logger = logging.getLogger(__name__)

RESOURCE_NOT_FOUND = -32002
INVALID_PARAMS = -32602
INTERNAL = -32603

RECORD_DETAIL_EXCLUDE = {"assistant_turns", "tool_rounds", "transitions"}
"""A record on the wire is its summary (DESIGN 3.4.1); the whole record stays readable over MCP."""


def record_summary(record: TurnRecord) -> dict[str, Any]:
    return record.model_dump(mode="json", exclude=RECORD_DETAIL_EXCLUDE)


def turn_error(record: TurnRecord) -> RequestError:
    """The error answering a `session/prompt` whose turn failed or timed out."""
    reason = f"{record.error.type}: {record.error.message}" if record.error else record.status
    return RequestError(INTERNAL, f"[turn {record.status}] {reason}", {"turn": record_summary(record)})


def request_error(exc: Exception) -> RequestError:
    if isinstance(exc, RequestError):
        return exc
    if isinstance(exc, NotFound):
        return RequestError(RESOURCE_NOT_FOUND, exc.message, {"type": exc.type})
    if isinstance(exc, InvalidArgument | ConfigError):
        return RequestError(INVALID_PARAMS, exc.message, {"type": exc.type})
    if isinstance(exc, AgentServerError):
        return RequestError(INTERNAL, exc.message, {"type": exc.type})
    logger.exception("internal error", exc_info=exc)
    return RequestError(INTERNAL, "internal error (see the agent server's log)", {"type": INTERNAL_ERROR})


@contextmanager
def wire_errors() -> Generator[None]:
    """Raise what the block raises as the `RequestError` the library answers with."""
    try:
        yield
    except Exception as exc:
        raise request_error(exc) from exc
