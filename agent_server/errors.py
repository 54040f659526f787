"""Leaf module: the exceptions agent-server raises, split by who acts on them.

```
AgentServerError                 base; `type` is the wire name in structuredContent.error.type
├── ConfigError                  bad settings, config file or CLI flags: fail at startup
├── InvalidArgument              a tool argument the caller must fix
├── NotFound
│   ├── SessionNotFound          unknown session id
│   └── TurnNotFound             unknown turn id (within a session, or by its id alone)
├── ModelError                   the LLM call failed (provider, script, network)
├── ToolFailure                  a tool of the agent refused or failed; becomes data for the model
└── StoreError                   the session store could not read or write
    ├── CompactionConflict       the session was compacted by another process meanwhile
    └── TurnLockLost             this process lost a session's turn lock while its turn ran
```

Cancellation is never one of these: it propagates through anyio cancel scopes.
`doors/errors.py` is the one place these are classified for the wire (each door maps the kind to its protocol).

Every error `type` on the wire (`structuredContent.error.type`, a turn record's `error.type`, an
`error` event's `error_type`) is one of the constants below: the exceptions' and the endings of
a turn that are no exception (a timeout, a cancellation, a tool-pass limit, a restart).
"""

from __future__ import annotations

from typing import Final

AGENT_SERVER_ERROR: Final = "agent_server_error"
CONFIG_ERROR: Final = "config_error"
INVALID_ARGUMENT: Final = "invalid_argument"
NOT_FOUND: Final = "not_found"
SESSION_NOT_FOUND: Final = "session_not_found"
TURN_NOT_FOUND: Final = "turn_not_found"
MODEL_ERROR: Final = "model_error"
TOOL_ERROR: Final = "tool_error"
STORE_ERROR: Final = "store_error"
COMPACTION_CONFLICT: Final = "compaction_conflict"

INTERNAL_ERROR: Final = "internal_error"
"""Anything unexpected: a bug, reported without internals (the details go to the log)."""
TIMED_OUT: Final = "timed_out"
"""A turn that did not finish within its deadline."""
CANCELLED: Final = "cancelled"
"""A turn whose caller cancelled it."""
MAX_TOOL_PASSES: Final = "max_tool_passes"
"""A turn halted because the model still asked for tools after its last allowed tool round."""
MAX_TOKENS: Final = "max_tokens"
"""A turn whose final answer was cut at the model's output token limit (status `truncated`)."""
INTERRUPTED: Final = "interrupted"
"""A turn that was still running when its server stopped (marked so at the next start)."""


class AgentServerError(Exception):
    """Base of every error agent-server raises on purpose."""

    type: str = AGENT_SERVER_ERROR

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigError(AgentServerError):
    type = CONFIG_ERROR


class InvalidArgument(AgentServerError):
    type = INVALID_ARGUMENT


class NotFound(AgentServerError):
    type = NOT_FOUND


class SessionNotFound(NotFound):
    type = SESSION_NOT_FOUND

    def __init__(self, session_id: str) -> None:
        super().__init__(f"unknown session {session_id!r}")
        self.session_id = session_id


class TurnNotFound(NotFound):
    type = TURN_NOT_FOUND

    def __init__(self, session_id: str | None, turn_id: str) -> None:
        """`session_id` None: the turn was looked up by its id alone."""
        alone = f"unknown turn {turn_id!r}"
        super().__init__(alone if session_id is None else f"session {session_id!r} has no turn {turn_id!r}")
        self.session_id = session_id
        self.turn_id = turn_id


class ModelError(AgentServerError):
    """The model call failed. `retryable` tells a provider's retry loop whether to try again."""

    type = MODEL_ERROR

    def __init__(self, message: str, *, retryable: bool = False, status: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status


class ToolFailure(AgentServerError):
    type = TOOL_ERROR


class StoreError(AgentServerError):
    type = STORE_ERROR


class CompactionConflict(StoreError):
    """A compaction was computed from a history that another compaction has changed since."""

    type = COMPACTION_CONFLICT

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} was compacted by another process meanwhile")
        self.session_id = session_id


class TurnLockLost(StoreError):
    """The connection holding a session's turn lock (shared store) was lost while a turn held it: another
    process may run the session's turns now, so this turn stopped and none of its writes were kept."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"this server lost the connection holding session {session_id!r}'s turn lock, so another server may "
            "run its turns now: the turn was stopped and its messages were not stored"
        )
        self.session_id = session_id
