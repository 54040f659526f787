from __future__ import annotations

import subprocess
import sys

import agent_server
import agent_server.testing


def test_all_is_exactly_the_public_surface() -> None:
    assert agent_server.__all__ == [
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
    for name in agent_server.__all__:
        assert getattr(agent_server, name) is not None
    assert agent_server.testing.__all__ == ["ScriptedLLM", "ScriptedResponse"]


def test_importing_the_package_stays_cheap() -> None:
    """`import agent_server` loads no part of the runtime (the server's start path depends on it)."""
    code = "import sys, agent_server; print(sorted(m for m in sys.modules if m.startswith('agent_server')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['agent_server', 'agent_server.errors']"


def test_the_package_declares_its_types() -> None:
    from importlib.resources import files

    assert files("agent_server").joinpath("py.typed").is_file()
