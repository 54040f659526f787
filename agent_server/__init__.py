"""agent-server: an agent runtime driven over the Model Context Protocol.

The public Python surface is small; most users drive the server over MCP (see README.md).
`create_server` is imported lazily so that `import agent_server` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_server.errors import (
    AgentServerError,
    ConfigError,
    InvalidArgument,
    ModelError,
    SessionNotFound,
    StoreError,
    TurnNotFound,
)

if TYPE_CHECKING:
    from agent_server.server.app import create_server
    from agent_server.settings import Settings

__all__ = [
    "AgentServerError",
    "ConfigError",
    "InvalidArgument",
    "ModelError",
    "SessionNotFound",
    "Settings",
    "StoreError",
    "TurnNotFound",
    "create_server",
]


def __getattr__(name: str) -> Any:
    if name == "create_server":
        from agent_server.server.app import create_server

        return create_server
    if name == "Settings":
        from agent_server.settings import Settings

        return Settings
    raise AttributeError(f"module 'agent_server' has no attribute {name!r}")
