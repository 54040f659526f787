"""Leaf module: the exceptions agent-server raises, split by who acts on them.

```
AgentServerError                 base; `type` is the wire name in structuredContent.error.type
├── ConfigError                  bad settings, config file or CLI flags: fail at startup
├── InvalidArgument              a tool argument the caller must fix
├── NotFound
│   ├── SessionNotFound          unknown session id
│   └── TurnNotFound             unknown turn id within a session
├── ModelError                   the LLM call failed (provider, script, network)
├── ToolFailure                  a tool of the agent refused or failed; becomes data for the model
└── StoreError                   the session store could not read or write
    └── CompactionConflict       the session was compacted by another process meanwhile
```

Cancellation is never one of these: it propagates through anyio cancel scopes.
`server/handlers.py` is the one place these become wire results.
"""

from __future__ import annotations


class AgentServerError(Exception):
    """Base of every error agent-server raises on purpose."""

    type = "agent_server_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigError(AgentServerError):
    type = "config_error"


class InvalidArgument(AgentServerError):
    type = "invalid_argument"


class NotFound(AgentServerError):
    type = "not_found"


class SessionNotFound(NotFound):
    type = "session_not_found"

    def __init__(self, session_id: str) -> None:
        super().__init__(f"unknown session {session_id!r}")
        self.session_id = session_id


class TurnNotFound(NotFound):
    type = "turn_not_found"

    def __init__(self, session_id: str, turn_id: str) -> None:
        super().__init__(f"session {session_id!r} has no turn {turn_id!r}")
        self.session_id = session_id
        self.turn_id = turn_id


class ModelError(AgentServerError):
    """The model call failed. `retryable` tells a provider's retry loop whether to try again."""

    type = "model_error"

    def __init__(self, message: str, *, retryable: bool = False, status: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status


class ToolFailure(AgentServerError):
    type = "tool_error"


class StoreError(AgentServerError):
    type = "store_error"


class CompactionConflict(StoreError):
    """A compaction was computed from a history that another compaction has changed since."""

    type = "compaction_conflict"

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} was compacted by another process meanwhile")
        self.session_id = session_id
