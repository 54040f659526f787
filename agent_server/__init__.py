"""agent-server: an agent runtime driven over the Model Context Protocol, or embedded as a library.

```python
from agent_server import AgentRuntime, Settings

async with AgentRuntime(Settings(workspace=".")) as runtime:
    record = await runtime.run_turn("What is in this workspace?")
```

Everything but the exceptions is imported on first use, so that `import agent_server` (and so the
server's start) stays cheap. `agent_server.testing` has the scripted model for tests.
"""

from __future__ import annotations

from importlib import import_module
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
    from agent_server.events import AgentEvent
    from agent_server.runtime import AgentRuntime, ToolsReport, TurnHandle
    from agent_server.server.app import create_server
    from agent_server.settings import Settings
    from agent_server.turn_options import ClientModel, TurnOptions
    from agent_server.types import CompactionRecord, SessionInfo, ToolSpec, TurnRecord, Usage

_LAZY = {
    "AgentEvent": "agent_server.events",
    "AgentRuntime": "agent_server.runtime",
    "ClientModel": "agent_server.turn_options",
    "CompactionRecord": "agent_server.types",
    "SessionInfo": "agent_server.types",
    "Settings": "agent_server.settings",
    "ToolSpec": "agent_server.types",
    "ToolsReport": "agent_server.runtime",
    "TurnHandle": "agent_server.runtime",
    "TurnOptions": "agent_server.turn_options",
    "TurnRecord": "agent_server.types",
    "Usage": "agent_server.types",
    "create_server": "agent_server.server.app",
}

__all__ = [
    "AgentEvent",
    "AgentRuntime",
    "AgentServerError",
    "ClientModel",
    "CompactionRecord",
    "ConfigError",
    "InvalidArgument",
    "ModelError",
    "SessionInfo",
    "SessionNotFound",
    "Settings",
    "StoreError",
    "ToolSpec",
    "ToolsReport",
    "TurnHandle",
    "TurnNotFound",
    "TurnOptions",
    "TurnRecord",
    "Usage",
    "create_server",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_server' has no attribute {name!r}")
    return getattr(import_module(module), name)
