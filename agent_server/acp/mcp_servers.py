"""The MCP servers a client gives in `session/new` (ACP `mcpServers`) -> mount configurations.

Stdio and HTTP servers are mounted (what `initialize` advertises); SSE servers are refused with a
clear error. A stdio server runs in the session's workspace, with the minimal environment every mount
gets plus the `env` the client gave. Header values are secrets (never logged, see `MountConfig`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from acp.schema import AcpMcpServer, HttpMcpServer, McpServerStdio, SseMcpServer
from pydantic import ValidationError

from agent_server.errors import InvalidArgument
from agent_server.mounts.config import MountConfig

ClientMcpServer = HttpMcpServer | SseMcpServer | AcpMcpServer | McpServerStdio


def mount_configs(servers: Sequence[ClientMcpServer] | None, workspace: Path) -> list[MountConfig]:
    """One `MountConfig` per server, in order.

    Raises:
        InvalidArgument: an SSE or ACP server, a server that is not valid, or two servers with one name.
    """
    configs = [_config(server, workspace) for server in servers or ()]
    names = [config.name for config in configs]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise InvalidArgument(f"mcpServers: more than one server is named {', '.join(map(repr, duplicated))}")
    return configs


def _config(server: ClientMcpServer, workspace: Path) -> MountConfig:
    try:
        if isinstance(server, McpServerStdio):
            env = {variable.name: variable.value for variable in server.env}
            return MountConfig(
                name=server.name, command=server.command, args=list(server.args), env=env, cwd=str(workspace)
            )
        if isinstance(server, HttpMcpServer):
            headers = {header.name: header.value for header in server.headers}
            return MountConfig(name=server.name, url=server.url, headers=headers)
    except ValidationError as exc:
        problems = "; ".join(str(error["msg"]) for error in exc.errors())
        raise InvalidArgument(f"mcpServers: server {server.name!r}: {problems}") from None
    raise InvalidArgument(f"mcpServers: server {server.name!r}: {server.type} servers are not supported (stdio, http)")
