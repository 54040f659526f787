"""Shared by `mounted_call.py` and `relay_progress.py`: the fake MCP server, mounted and called directly.

* `mount_config()` writes an `--mcp-config` file (Claude Desktop format) that mounts `tests/fakes/mcp_echo.py`
  under the name `PREFIX`, so its tools are `fake__echo`, `fake__burst`, ...
* `wait_mount_ready()` polls `agent_tools` until the mounted server is `ready` (servers start in the background).
* `direct_client()` opens an `mcp.Client` over stdio to a separate process of the same fake server, in the same
  protocol mode (`auto`) agent-server's mounts use, with an untimed `tools/list` (the SDK client lists the tools
  before a tool's first call, for output-schema validation) and an untimed `echo` call (the first call imports
  `jsonschema`; agent-server's client does the same in its first turn, which the benches keep untimed too).
* `new_session()`: a fresh session per turn, created untimed, so history never accumulates across turns.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from _jsonrpc import RpcServer
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parent.parent
FAKE_SERVER = REPO / "tests" / "fakes" / "mcp_echo.py"
PREFIX = "fake"
MODE = "auto"
READY_TIMEOUT_S = 60.0


def mount_config(path: Path) -> Path:
    servers = {PREFIX: {"command": sys.executable, "args": [str(FAKE_SERVER)]}}
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


def allow_mounted(path: Path) -> list[str]:
    """The `--config` flags of a settings file letting the fake's tools run without approval (none can be
    asked over a raw client; DESIGN 3.7): these benches measure the call, not the gate."""
    path.write_text(json.dumps({"approvals": {"tools": {f"{PREFIX}__*": "allow"}}}), encoding="utf-8")
    return ["--config", str(path)]


def mounted(tool: str) -> str:
    return f"{PREFIX}__{tool}"


async def wait_mount_ready(agent: RpcServer) -> dict[str, Any]:
    """The mounted server's entry in `agent_tools` once it is `ready` (raises if it failed)."""
    with anyio.fail_after(READY_TIMEOUT_S):
        while True:
            result = await agent.call_tool("agent_tools", {})
            servers = {s["name"]: s for s in result["structuredContent"]["servers"]}
            server = servers[PREFIX]
            if server["state"] == "ready":
                return server
            if server["state"] in ("failed", "stopped"):
                raise RuntimeError(f"mounted server {PREFIX!r} is {server['state']}: {server.get('error')}")
            await anyio.sleep(0.05)


async def new_session(agent: RpcServer, title: str) -> str:
    created = await agent.call_tool("session_create", {"title": title})
    return created["structuredContent"]["session_id"]


@asynccontextmanager
async def direct_client() -> AsyncGenerator[Client]:
    params = StdioServerParameters(command=sys.executable, args=[str(FAKE_SERVER)], cwd=str(REPO))
    async with Client(params, mode=MODE) as client:
        await client.list_tools()
        await client.call_tool("echo", {"text": "warm"})
        yield client
