"""The one place where exceptions and failed turns become ACP JSON-RPC errors.

Codes, by the kind `doors.errors` gives: an unknown session is `resource_not_found` (-32002); an argument the
client must fix is `invalid_params` (-32602); anything else (the store, a bug) is `internal_error` (-32603) with a
message that names no internals (the details go to the log). A failed or timed-out turn is an
`internal_error` whose `data.turn` is the turn's summary (`doors.records`, as MCP results carry it), and whose
message is the turn's status and error (`[turn failed] model_error: provider down`).
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager

from acp import RequestError

from agent_server.doors.errors import ErrorKind, classify
from agent_server.doors.records import turn_json
from agent_server.types import TurnRecord

RESOURCE_NOT_FOUND = -32002
INVALID_PARAMS = -32602
INTERNAL = -32603


def turn_error(record: TurnRecord) -> RequestError:
    """The error answering a `session/prompt` whose turn failed or timed out."""
    reason = f"{record.error.type}: {record.error.message}" if record.error else record.status
    return RequestError(INTERNAL, f"[turn {record.status}] {reason}", {"turn": turn_json(record)})


CODES: dict[ErrorKind, int] = {"not_found": RESOURCE_NOT_FOUND, "invalid": INVALID_PARAMS, "internal": INTERNAL}


def request_error(exc: Exception, method: str) -> RequestError:
    """The JSON-RPC error answering `method` that raised `exc`, as `doors.errors` classifies it."""
    if isinstance(exc, RequestError):
        return exc
    error = classify(exc, doing=method)
    return RequestError(CODES[error.kind], error.message, {"type": error.type})


@contextmanager
def wire_errors(method: str) -> Generator[None]:
    """Raise what the block raises as the `RequestError` the library answers `method` with."""
    try:
        yield
    except Exception as exc:
        raise request_error(exc, method) from exc
