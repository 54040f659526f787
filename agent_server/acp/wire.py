"""`NdjsonWire`: the ACP library's message transport over the guarded stdio (`doors.stdio`), every line checked.

The library's own stdio transport hands each parsed line to its connection as a message, whatever it is: a
line that is valid JSON but not an object (`[1,2,3]`, `5`, `null`) or whose `id` cannot key a dictionary
(`{"id": [1], "result": 1}`) raises in the connection's receive loop and ends the process (every session of
that editor). It also assembles a line longer than its reader's limit chunk by chunk without end. This
transport stands in for it (the library takes any `Transport`):

- lines come from `doors.stdio.LineReader`, bounded (`MAX_LINE_BYTES`, as on the MCP door): past the limit the
  connection ends as at end of input (logged), since the stream cannot resynchronise;
- a line that is not JSON is answered with a JSON-RPC parse error (-32700), and one that is JSON but not a
  request, notification or response the connection can route is answered with an invalid request (-32600),
  both with `id: null` as JSON-RPC 2.0 says; then the next line is read. ACP has no batches: an array is an
  invalid request as a whole (one answer, not one per element);
- messages are written whole, one at a time, in the order they were sent.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any, Protocol

logger = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


class NdjsonWire:
    """One JSON-RPC message per line each way (the library's `Transport` protocol: `send`, `receive`, `close`)."""

    def __init__(self, reader: AsyncIterator[str], writer: MessageWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def send(self, message: dict[str, Any]) -> None:
        await self._writer.write(json.dumps(message, separators=(",", ":")) + "\n")

    async def receive(self) -> dict[str, Any] | None:
        """The next message the connection can route, answering the lines that are none; None at end of input."""
        async for line in self._reader:
            message, error = parse_message(line)
            if message is not None:
                return message
            if error is not None:
                logger.warning("answered a client line with %s", error["message"])
                await self.send({"jsonrpc": "2.0", "id": None, "error": error})
        return None

    async def close(self) -> None:
        """Nothing to release: the wire's descriptors belong to `doors.stdio.claim_stdio`."""


class MessageWriter(Protocol):
    async def write(self, text: str) -> None:
        """Write `text` whole (messages from concurrent senders never interleave)."""
        ...


def parse_message(line: str | bytes) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The message on `line`, or the JSON-RPC error object that answers it (neither for a blank line)."""
    if not line.strip():
        return None, None
    try:
        value: object = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
        return None, _error(PARSE_ERROR, "Parse error: the line is not JSON")
    problem = _envelope_problem(value)
    if problem is not None:
        return None, _error(INVALID_REQUEST, f"Invalid Request: {problem}")
    assert isinstance(value, dict)
    return value, None  # pyright: ignore[reportUnknownVariableType]


def _envelope_problem(value: object) -> str | None:
    """Why `value` is no JSON-RPC request, notification or response the connection can route (None: it is one)."""
    if isinstance(value, list):
        return "batches are not supported (ACP sends one message per line)"
    if not isinstance(value, dict):
        return f"a message must be a JSON object, not {_json_kind(value)}"
    message: dict[str, object] = value  # pyright: ignore[reportUnknownVariableType]
    if "id" in message and not _is_id(message["id"]):
        return "`id` must be a string, a number or null"
    if "method" in message:
        return None if isinstance(message["method"], str) else "`method` must be a string"
    if "id" not in message or ("result" not in message and "error" not in message):
        return "neither a request (`method`) nor a response (`id` with `result` or `error`)"
    return None


def _is_id(value: object) -> bool:
    # JSON-RPC ids are strings, numbers or null; a boolean is none of them (Python's bool is an int).
    return value is None or isinstance(value, str) or (isinstance(value, int | float) and not isinstance(value, bool))


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    return "a number"


def _error(code: int, message: str) -> dict[str, Any]:
    return {"code": code, "message": message}
