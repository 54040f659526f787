"""Mounted MCP servers' configuration: the `mcpServers` JSON users already have, read as-is.

Accepted documents (`parse_mcp_servers`):

- Claude Desktop / Cursor: `{"mcpServers": {"<name>": {...}}}` (other top-level keys are ignored);
- VS Code: `{"servers": {...}, "inputs": [...]}` (`inputs` is ignored) or its settings form `{"mcp": {"servers": ...}}`;
- a bare mapping `{"<name>": {...}}`, e.g. the value of `mcpServers` in agent-server's own config file.

An entry is a stdio server (`command`, `args`, `env`, `cwd`) or a Streamable HTTP server (`url`, `headers`):
exactly one of `command` and `url`. VS Code's and Cursor's `type` (or `transport`) key is accepted and
checked against that: `stdio`, or `http`/`streamable-http`/`streamableHttp`; `sse` is refused (the legacy SSE
transport is not supported). agent-server's own keys: `enabled` (default true; Cline's `disabled` is honoured
too), `timeout_s` (per call, 120), `startup_timeout_s` (30), `include`/`exclude` (fnmatch globs on the server's
own tool names), `prefix` (the tool-name prefix, default the server name), `max_connections` (a Streamable HTTP
server's calls in flight at once; default no limit). Keys that only other clients use
(`autoApprove`, `alwaysAllow`, `description`, `dev`, `gallery`) are ignored; any other key is an error, so a
typo cannot silently drop a setting. `envFile` is refused: put the variables in `env`.

`${VAR}` and VS Code's `${env:VAR}` in `command`, `args`, `env`, `cwd`, `url` and `headers` expand from the
given environment (`${VAR:-default}` gives a default); an unset variable is a `ConfigError` naming the server
and the variable. VS Code's `${input:...}` is refused the same way.

What is expanded into `url` or `headers`, and every header value, is a secret (`MountConfig.secrets`):
it is redacted (`agent_server.redaction`) from every error, log line and `agent_tools` entry, as are
the credentials written in a URL (`user:password@`, query values).
"""

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agent_server.errors import ConfigError
from agent_server.redaction import MASK, redact

Transport = Literal["stdio", "http"]

_TYPE_ALIASES: dict[str, Transport] = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamableHttp": "http",
}
_IGNORED_KEYS = frozenset({"autoApprove", "alwaysAllow", "description", "dev", "gallery"})
_VAR = re.compile(r"\$\{([^}]*)\}")
_VAR_NAME = re.compile(r"(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?", re.DOTALL)


class MountConfig(BaseModel):
    """One mounted MCP server. Exactly one of `command` (stdio) and `url` (Streamable HTTP)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    command: str | None = Field(default=None, min_length=1)
    args: list[str] = Field(default_factory=list[str])
    env: dict[str, str] = Field(default_factory=dict[str, str])
    """Added to the minimal environment the server gets (never the agent server's whole environment)."""
    cwd: str | None = None
    url: str | None = Field(default=None, min_length=1)
    headers: dict[str, str] = Field(default_factory=dict[str, str])
    enabled: bool = True
    timeout_s: float = Field(default=120, gt=0)
    """Deadline of one call, including a restart of a crashed server."""
    startup_timeout_s: float = Field(default=30, gt=0)
    """Deadline of the connection, handshake and first `tools/list`."""
    include: list[str] | None = None
    """Globs of the server's tool names to offer (None: all)."""
    exclude: list[str] = Field(default_factory=list[str])
    """Globs of the server's tool names never offered; applied after `include`."""
    prefix: str | None = Field(default=None, min_length=1)
    """Tool-name prefix (`<prefix>__<tool>`); the server name when not set."""
    max_connections: int | None = Field(default=None, ge=1)
    """A Streamable HTTP server's calls in flight at once (HTTP connections to it); None: no limit of the client's
    own, so the agent's concurrency decides (httpx2's default would hold the 101st call back). Ignored for stdio."""
    trust: bool = False
    """Believe the server's `readOnlyHint`: its read-only tools then run without approval (DESIGN 3.7).
    Untrusted (the default), every one of its tools passes the approval gate."""
    expanded_secrets: tuple[str, ...] = Field(default=(), repr=False, exclude=True)
    """Values the parser expanded from `${VAR}` into `url` or `headers` (set by the parser, not by users)."""

    @property
    def secrets(self) -> tuple[str, ...]:
        """What must never be shown: the expanded values and every header value."""
        return (*self.expanded_secrets, *self.headers.values())

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """The repr (and str) show the URL redacted and no header value."""
        for key, value in super().__repr_args__():
            if key == "url" and isinstance(value, str):
                yield key, redact(value, self.secrets)
            elif key == "headers":
                yield key, dict.fromkeys(self.headers, MASK)
            else:
                yield key, value

    @model_validator(mode="after")
    def _one_transport(self) -> Self:
        if (self.command is None) == (self.url is None):
            raise ValueError("needs exactly one of `command` (stdio) and `url` (Streamable HTTP)")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url {redact(self.url, self.secrets)!r} is not an http:// or https:// URL")
        return self

    @property
    def transport(self) -> Transport:
        return "stdio" if self.command is not None else "http"

    @property
    def tool_prefix(self) -> str:
        return self.prefix or self.name


def parse_mcp_servers(data: Mapping[str, Any], *, environ: Mapping[str, str]) -> list[MountConfig]:
    """The servers of a whole config document (see the module docstring for the formats), in document order.

    Raises:
        ConfigError: the document or an entry is malformed, or a `${VAR}` is unset; the message names the server.
    """
    servers = _servers_mapping(data)
    return [_parse_entry(name, entry, environ) for name, entry in servers.items()]


def load_mcp_config_file(path: Path, *, environ: Mapping[str, str]) -> list[MountConfig]:
    """Read a JSON `mcpServers` file (Claude Desktop, Cursor, VS Code, or a bare mapping).

    A relative `cwd` is taken relative to the file's directory.

    Raises:
        ConfigError: the file cannot be read or parsed, or an entry is invalid.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read MCP config file {path}: {exc.strerror}") from exc
    try:
        data: object = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"MCP config file {path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"MCP config file {path} must hold an object at the top level")
    configs = parse_mcp_servers(data, environ=environ)  # pyright: ignore[reportUnknownArgumentType]
    base = path.expanduser().resolve().parent
    return [
        c.model_copy(update={"cwd": str(base / c.cwd)}) if c.cwd and not Path(c.cwd).is_absolute() else c
        for c in configs
    ]


def _servers_mapping(data: Mapping[str, Any]) -> Mapping[str, Any]:
    if "mcpServers" in data:
        servers = data["mcpServers"]
        where = "mcpServers"
    elif _is_vscode_servers(data.get("servers")):
        servers, where = data["servers"], "servers"
    elif isinstance(data.get("mcp"), dict) and "servers" in data["mcp"]:
        servers, where = data["mcp"]["servers"], "mcp.servers"
    else:
        servers, where = data, "the top level"
    if not isinstance(servers, dict):
        raise ConfigError(f"MCP config: {where} must be an object mapping server names to entries")
    return servers  # pyright: ignore[reportUnknownVariableType]


def _is_vscode_servers(value: object) -> bool:
    """`servers` holding entries (VS Code), as opposed to a bare mapping with a server named `servers`."""
    return isinstance(value, dict) and not ({"command", "url"} & value.keys())  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]


def _parse_entry(name: str, entry: object, environ: Mapping[str, str]) -> MountConfig:
    if not isinstance(entry, dict):
        raise ConfigError(f"MCP server {name!r}: the entry must be an object")
    values: dict[str, Any] = {k: v for k, v in entry.items() if k not in _IGNORED_KEYS}  # pyright: ignore[reportUnknownVariableType]
    _apply_type(name, values)
    _apply_disabled(name, values)
    if "envFile" in values:
        raise ConfigError(f"MCP server {name!r}: `envFile` is not supported; put the variables in `env`")
    if "expanded_secrets" in values:
        raise ConfigError(f"MCP server {name!r}: expanded_secrets: unknown key")
    secrets: list[str] = []
    for key in ("command", "args", "env", "cwd", "url", "headers"):
        if key in values:
            found = secrets if key in ("url", "headers") else None
            values[key] = _expand(name, key, values[key], environ, found)
    values["expanded_secrets"] = tuple(secrets)
    try:
        return MountConfig(name=name, **values)
    except ValidationError as exc:
        raise ConfigError(f"MCP server {name!r}: {_describe(exc)}") from exc
    except TypeError as exc:  # e.g. a `name` key inside the entry
        raise ConfigError(f"MCP server {name!r}: {exc}") from exc


def _apply_type(name: str, values: dict[str, Any]) -> None:
    declared = values.pop("type", None)
    other = values.pop("transport", None)
    if declared is not None and other is not None and declared != other:
        raise ConfigError(f"MCP server {name!r}: `type` {declared!r} and `transport` {other!r} disagree")
    kind = declared if declared is not None else other
    if kind is None:
        return
    if kind == "sse":
        raise ConfigError(f"MCP server {name!r}: the SSE transport is not supported; use Streamable HTTP (`url`)")
    transport = _TYPE_ALIASES.get(kind) if isinstance(kind, str) else None
    if transport is None:
        raise ConfigError(f"MCP server {name!r}: unknown type {kind!r} (expected stdio or http)")
    needed = "command" if transport == "stdio" else "url"
    if needed not in values:
        raise ConfigError(f"MCP server {name!r}: type {kind!r} needs `{needed}`")


def _apply_disabled(name: str, values: dict[str, Any]) -> None:
    if "disabled" not in values:
        return
    disabled = values.pop("disabled")
    if not isinstance(disabled, bool):
        raise ConfigError(f"MCP server {name!r}: `disabled` must be true or false")
    if "enabled" in values and values["enabled"] == disabled:
        raise ConfigError(f"MCP server {name!r}: `enabled` and `disabled` disagree")
    values["enabled"] = not disabled


def _expand(name: str, key: str, value: object, environ: Mapping[str, str], found: list[str] | None = None) -> object:
    """Expand `${VAR}` in a string, or in every string of a list or every value of a mapping.

    Each value substituted is appended to `found` (when given).
    """
    if isinstance(value, str):
        return _expand_str(name, key, value, environ, found)
    if isinstance(value, list):
        items: list[object] = value  # pyright: ignore[reportUnknownVariableType]
        return [_expand(name, key, item, environ, found) for item in items]
    if isinstance(value, dict):
        mapping: dict[object, object] = value  # pyright: ignore[reportUnknownVariableType]
        return {k: _expand(name, f"{key}.{k}", v, environ, found) for k, v in mapping.items()}
    return value  # pydantic reports the wrong type


def _expand_str(name: str, key: str, text: str, environ: Mapping[str, str], found: list[str] | None) -> str:
    def substitute(match: re.Match[str]) -> str:
        ref = match.group(1)
        parsed = _VAR_NAME.fullmatch(ref)
        if parsed is None:
            raise ConfigError(
                f"MCP server {name!r}: {key} uses ${{{ref}}}, which cannot be expanded "
                "(only environment variables: ${VAR} or ${env:VAR})"
            )
        var, default = parsed.group(1), parsed.group(2)
        if var not in environ and default is None:
            raise ConfigError(f"MCP server {name!r}: {key} uses ${{{ref}}} but environment variable {var} is not set")
        value = environ.get(var, default or "")
        if found is not None:
            found.append(value)
        return value

    return _VAR.sub(substitute, text)


def _describe(exc: ValidationError) -> str:
    problems: list[str] = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        message = "unknown key" if error["type"] == "extra_forbidden" else error["msg"]
        problems.append(f"{where}: {message}" if where else message.removeprefix("Value error, "))
    return "; ".join(problems)
