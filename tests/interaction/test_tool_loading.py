"""A tool's module loads with the first call of one of its tools: a `run_turn` never loads the session tools."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.interaction.harness import MODES

SCRIPT = """
import sys, anyio
from mcp import Client
from agent_server import Settings
from agent_server.server.app import create_server
from agent_server.testing import ScriptedLLM

async def main():
    settings = Settings(workspace={workspace!r}, state_dir={state!r})
    server = create_server(settings, llm=ScriptedLLM([{{"content": "ok"}}]))
    with anyio.fail_after(30):
        async with Client(server, mode={mode!r}) as client:
            turn = await client.call_tool("run_turn", {{"prompt": "hi"}})
            loaded = "agent_server.server.session_tools" in sys.modules
            listed = await client.call_tool("session_list", {{}})
    print(turn.structured_content["status"], loaded, listed.is_error, len(listed.structured_content["sessions"]))

anyio.run(main)
"""


@pytest.mark.parametrize("mode", MODES)
def test_a_turn_leaves_the_session_tools_unloaded_until_one_is_called(tmp_path: Path, mode: str) -> None:
    (tmp_path / "ws").mkdir()
    code = SCRIPT.format(workspace=str(tmp_path / "ws"), state=str(tmp_path / "state"), mode=mode)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["completed", "False", "False", "1"]
