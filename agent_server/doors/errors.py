"""Which exceptions the caller caused and which are internal: one classification, one logging rule, every door.

- `not_found`: an unknown session or turn (or another principal's, answered the same way): `NotFound`.
- `invalid`: something the caller must fix: `InvalidArgument`, `ConfigError`, or a request whose arguments do
  not validate (pydantic's `ValidationError`, described field by field).
- `internal`: everything else. A known error (`AgentServerError`: the store, the model) keeps its type and
  message; an unexpected exception is logged here, once, with its traceback, and the caller reads only that
  it happened and where to look.

A door maps the kind to its protocol (ACP: -32002, -32602, -32603; MCP: an `isError` result carrying the type and
the message). Cancellation is never an error here: it propagates.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from pydantic import ValidationError

from agent_server.errors import (
    INTERNAL_ERROR,
    INVALID_ARGUMENT,
    AgentServerError,
    ConfigError,
    InvalidArgument,
    NotFound,
)

logger = logging.getLogger(__name__)

ErrorKind = Literal["not_found", "invalid", "internal"]


@dataclass(frozen=True)
class DoorError:
    """What the caller is told of an exception."""

    kind: ErrorKind
    type: str
    """The error's wire name (`agent_server.errors`), e.g. `session_not_found`."""
    message: str


def classify(exc: Exception, *, doing: str) -> DoorError:
    """The caller's view of `exc`, raised while serving `doing` (a tool or method name, for messages and the log)."""
    if isinstance(exc, ValidationError):
        return DoorError("invalid", INVALID_ARGUMENT, validation_message(doing, exc))
    if isinstance(exc, NotFound):
        return DoorError("not_found", exc.type, exc.message)
    if isinstance(exc, InvalidArgument | ConfigError):
        return DoorError("invalid", exc.type, exc.message)
    if isinstance(exc, AgentServerError):
        return DoorError("internal", exc.type, exc.message)
    logger.error("%s failed", doing, exc_info=exc)
    return DoorError("internal", INTERNAL_ERROR, f"internal error in {doing}; see the agent server's log")


def validation_message(doing: str, exc: ValidationError) -> str:
    """`invalid arguments for <doing>: <where>: <problem>; ...`, an unknown key named as such."""
    problems: list[str] = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        message = "unknown argument" if error["type"] == "extra_forbidden" else error["msg"]
        problems.append(f"{where}: {message}")
    return f"invalid arguments for {doing}: " + "; ".join(problems)
