"""`MountManager`: the mounted MCP servers as one `Toolset`.

Entering it (`async with MountManager(configs) as mounts`, or `await tg.start(mounts.run)`) starts
every enabled server concurrently in the background and returns at once; `list_tools()` offers what
is ready by then. Each server is a `ServerToolset` (its selected tools under their own names, with
`source="mcp:<server>"`) wrapped in a `PrefixedToolset` that names them `<prefix>__<tool>` (see
`naming.py`); the manager merges those. A tool is dropped, with the reason listed by `dropped()`,
when its input schema is invalid (`input_schemas.py`) or its name is already taken (after
sanitising, or across prefixes that nest: the server configured first keeps the name); the other
tools are offered as usual.
A server that crashed keeps offering its last known tools, so that the model can still call them: the
call restarts the server (see `connection.py`). Leaving it stops every server and leaves no child
process behind; each stdio server gets `stop_grace_s` to exit after its stdin closes, then its
process group is terminated, so shutdown takes about `stop_grace_s` + 0.5 s at worst.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import mcp_types as types

from agent_server.errors import ConfigError, ToolFailure
from agent_server.mounts.config import MountConfig
from agent_server.mounts.connection import MountConnection
from agent_server.mounts.input_schemas import schema_problem
from agent_server.mounts.naming import mounted_tool_name, tool_selected
from agent_server.mounts.transport import InProcessServer
from agent_server.tools.base import ProgressCallback, error_result, unknown_tool
from agent_server.tools.wrappers import PrefixedToolset
from agent_server.types import (
    ContentPart,
    DroppedTool,
    ImagePart,
    TextPart,
    ToolAnnotations,
    ToolCall,
    ToolResult,
    ToolSpec,
)

logger = logging.getLogger(__name__)

_SHUTDOWN_SLACK_S = 3.0
DEFAULT_RESULT_MAX_BYTES = 256 * 1024
"""`Settings.mount_result_max_bytes` by default."""


class MountManager:
    """Implements `Toolset` over the mounted servers. See the module docstring."""

    def __init__(
        self,
        configs: Sequence[MountConfig],
        *,
        environ: Mapping[str, str] | None = None,
        in_process: Mapping[str, InProcessServer] | None = None,
        mode: str = "auto",
        progress_interval_s: float = 0.1,
        stop_grace_s: float = 1.0,
        result_max_bytes: int = DEFAULT_RESULT_MAX_BYTES,
    ) -> None:
        """
        Args:
            configs: the servers; disabled ones are listed by `states()` as `stopped`.
            environ: where a stdio server's minimal environment comes from (default `os.environ`).
            in_process: servers (by name) to connect in-process instead of by `command`/`url` (tests).
            mode: the `mcp.Client` protocol mode: `auto` probes 2026-07-28 and falls back to `initialize`.
            progress_interval_s: a mounted call's progress reaches `on_progress` at most once per interval.
            stop_grace_s: how long a stdio server may take to exit after its stdin closes at shutdown.
            result_max_bytes: a call's result is cut to this size (`to_tool_result`).

        Raises:
            ConfigError: two servers share a name.
        """
        _check_unique(configs)
        self._stop_grace_s = stop_grace_s
        self._result_max_bytes = result_max_bytes
        environ = os.environ if environ is None else environ
        self._connections = {
            config.name: MountConnection(
                config,
                environ=environ,
                mode=mode,
                in_process=(in_process or {}).get(config.name),
                progress_interval_s=progress_interval_s,
                stop_grace_s=stop_grace_s,
            )
            for config in configs
        }
        self._servers = {
            name: (server, PrefixedToolset(server, functools.partial(mounted_tool_name, connection.config.tool_prefix)))
            for name, connection in self._connections.items()
            for server in [ServerToolset(connection, result_max_bytes=result_max_bytes)]
        }
        self._merge_cache: _Merged | None = None
        self._tg: anyio.abc.TaskGroup | None = None

    @property
    def connections(self) -> Mapping[str, MountConnection]:
        return self._connections

    # --- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> MountManager:
        if self._tg is not None:
            raise RuntimeError("MountManager is already running")
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        for connection in self._connections.values():
            connection.start(self._tg)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._tg is not None
        with anyio.CancelScope(shield=True):
            for connection in self._connections.values():
                connection.stop()
            with anyio.move_on_after(self._stop_grace_s + _SHUTDOWN_SLACK_S):
                for connection in self._connections.values():
                    await connection.wait_finished()
            self._tg.cancel_scope.cancel()
        return await self._tg.__aexit__(exc_type, exc, tb)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run the mounts until cancelled, for `await task_group.start(manager.run)`."""
        async with self:
            task_status.started()
            await anyio.sleep_forever()

    @property
    def starting(self) -> bool:
        """Whether a server is still starting (`wait_started` would wait)."""
        return any(connection.state == "starting" for connection in self._connections.values())

    async def wait_started(self) -> None:
        """Wait for the servers still starting, each at most its `startup_timeout_s`."""
        async with anyio.create_task_group() as tg:
            for connection in self._connections.values():
                if connection.state == "starting":
                    tg.start_soon(connection.wait_settled)

    def unavailable(self) -> list[tuple[str, str]]:
        """`(server, why)` for every enabled server that is not ready (failed, or still starting)."""
        return [
            (c.name, c.error or ("still starting" if c.state == "starting" else c.state))
            for c in self._connections.values()
            if c.config.enabled and c.state != "ready"
        ]

    def states(self) -> list[dict[str, Any]]:
        """Each server's `name`, `transport` (`stdio`/`http`), `state`, `error` and `tool_count` (tools offered)."""
        offered = [server for server, _ in self._merged().routes.values()]
        return [
            {
                "name": c.name,
                "transport": c.config.transport,
                "state": c.state,
                "error": c.error,
                "tool_count": offered.count(c.name),
            }
            for c in self._connections.values()
        ]

    # --- Toolset ------------------------------------------------------------------------------

    async def list_tools(self) -> list[ToolSpec]:
        """The tools of the servers that are ready (or crashed and restartable), filtered and prefixed."""
        return self._merged().specs

    def dropped(self) -> list[DroppedTool]:
        """The servers' tools not offered (a name clash, an invalid input schema), with the reasons."""
        return list(self._merged().dropped)

    async def call_tool(self, call: ToolCall, *, on_progress: ProgressCallback | None = None) -> ToolResult:
        route = self._merged().routes.get(call.name)
        if route is None:
            return unknown_tool(call)
        return await route[1].call_tool(call, on_progress=on_progress)

    def _merged(self) -> _Merged:
        """Every server's prefixed tools in one list; merged again only when a server's tools changed."""
        offers = [
            (name, prefixed, prefixed.offer(server.specs())) for name, (server, prefixed) in self._servers.items()
        ]
        cached = self._merge_cache
        if cached is not None and all(a is b for a, b in zip(cached.offers, (o for _, _, o in offers), strict=True)):
            return cached
        self._merge_cache = _merge(offers)
        return self._merge_cache


_Offer = tuple[str, PrefixedToolset, list[ToolSpec]]
"""A server's name, its prefixed toolset and what that offers now."""


@dataclass(frozen=True)
class _Merged:
    offers: list[list[ToolSpec]]
    specs: list[ToolSpec]
    routes: dict[str, tuple[str, PrefixedToolset]]
    """Agent-side name -> (server name, the server's prefixed toolset)."""
    dropped: list[DroppedTool]


def _merge(offers: list[_Offer]) -> _Merged:
    """The servers' tools as one list: a name two servers offer (prefixes can nest) stays the first's."""
    routes: dict[str, tuple[str, PrefixedToolset]] = {}
    specs: list[ToolSpec] = []
    dropped: list[DroppedTool] = []
    for server, prefixed, offered in offers:
        dropped += prefixed.dropped()
        for spec in offered:
            first = routes.get(spec.name)
            if first is not None:
                taken = f"the name is already taken by 'mcp:{first[0]}' (its tool {first[1].inner_name(spec.name)!r})"
                reason = f"its tool {prefixed.inner_name(spec.name)!r}: {taken}"
                dropped.append(DroppedTool(name=spec.name, source=spec.source, reason=reason))
                continue
            routes[spec.name] = (server, prefixed)
            specs.append(spec)
    return _Merged(offers=[o for _, _, o in offers], specs=specs, routes=routes, dropped=dropped)


class ServerToolset:
    """One mounted server's tools under their own names. Implements `Toolset` and `DropsTools`.

    Offers the server's current tools that its entry's `include`/`exclude` select and whose input schema is
    valid (the others are dropped with the reason); `specs()` returns the same list object until the
    server's tool list changes, so the wrappers above it redo nothing.
    """

    def __init__(self, connection: MountConnection, *, result_max_bytes: int) -> None:
        self._connection = connection
        self._result_max_bytes = result_max_bytes
        self._key: tuple[bool, list[types.Tool]] | None = None
        self._specs: list[ToolSpec] = []
        self._dropped: list[DroppedTool] = []

    def specs(self) -> list[ToolSpec]:
        connection = self._connection
        # A connection replaces its `tools` list when it changes, so identity tells whether anything did.
        key = (connection.state == "stopped", connection.tools)
        if self._key is None or self._key[0] != key[0] or self._key[1] is not key[1]:
            self._key = key
            self._specs, self._dropped = ([], []) if key[0] else _server_specs(connection)
        return self._specs

    async def list_tools(self) -> list[ToolSpec]:
        return self.specs()

    def dropped(self) -> list[DroppedTool]:
        return list(self._dropped)

    async def call_tool(self, call: ToolCall, *, on_progress: ProgressCallback | None = None) -> ToolResult:
        try:
            result = await self._connection.call_tool(call.name, call.arguments, on_progress=on_progress)
        except ToolFailure as exc:
            return error_result(call, exc.message)
        return to_tool_result(call.id, call.name, result, max_bytes=self._result_max_bytes)


def _server_specs(connection: MountConnection) -> tuple[list[ToolSpec], list[DroppedTool]]:
    specs: list[ToolSpec] = []
    dropped: list[DroppedTool] = []
    source = f"mcp:{connection.name}"
    config = connection.config
    for tool in connection.tools:
        if not tool_selected(tool.name, config.include, config.exclude):
            continue
        problem = schema_problem(tool.input_schema)
        if problem is not None:
            dropped.append(DroppedTool(name=tool.name, source=source, reason=f"its tool {tool.name!r}: {problem}"))
            continue
        description = tool.description or tool.title or ""
        annotations = _annotations(tool)
        specs.append(
            ToolSpec(
                name=tool.name,
                description=description,
                input_schema=tool.input_schema,
                source=source,
                annotations=annotations,
            )
        )
    return specs, dropped


def _annotations(tool: types.Tool) -> ToolAnnotations:
    """The mounted tool's own annotations, kept as it sent them (whether to trust them is the gate's call)."""
    hints = tool.annotations
    if hints is None:
        return ToolAnnotations(title=tool.title)
    return ToolAnnotations(
        title=hints.title or tool.title,
        read_only=hints.read_only_hint,
        destructive=hints.destructive_hint,
        idempotent=hints.idempotent_hint,
        open_world=hints.open_world_hint,
    )


def _check_unique(configs: Sequence[MountConfig]) -> None:
    """Server names are unique. Prefixes may clash: only the clashing tools are dropped (see `_build_routes`)."""
    names: set[str] = set()
    for config in configs:
        if config.name in names:
            raise ConfigError(f"MCP server {config.name!r} is configured twice")
        names.add(config.name)


def to_tool_result(
    call_id: str,
    name: str,
    result: types.CallToolResult,
    *,
    max_bytes: int = DEFAULT_RESULT_MAX_BYTES,
) -> ToolResult:
    """A mounted server's `CallToolResult` as the model sees it; an `isError` result stays data.

    Bounded like `read_file` (`mount_result_max_bytes`): the text parts keep at most `max_bytes`
    (UTF-8) in all, an image that does not fit in what is left is dropped, and structured content
    whose JSON is longer is dropped; a note at the end tells the model what was cut.
    """
    structured = result.structured_content
    if structured is not None and not isinstance(structured, dict):
        structured = {"result": structured}
    cut = _Cut(max_bytes)
    content: list[ContentPart] = [part for block in result.content for part in cut.keep(_content(block))]
    structured_text = json.dumps(result.structured_content, ensure_ascii=False) if structured is not None else ""
    size = len(structured_text.encode())
    if size > max_bytes:
        structured = None
        cut.notes.append(f"structured content of {size} bytes dropped")
    if not content and structured_text:
        content = cut.keep([TextPart(text=structured_text)])
    if cut.notes:
        note = "; ".join(cut.notes)
        content.append(TextPart(text=f"[result truncated (over {max_bytes} bytes, mount_result_max_bytes): {note}]"))
    return ToolResult(
        call_id=call_id,
        name=name,
        is_error=result.is_error,
        content=content,
        structured=structured,  # pyright: ignore[reportUnknownArgumentType]
    )


class _Cut:
    """What is left of one result's byte budget, and notes on what did not fit."""

    def __init__(self, max_bytes: int) -> None:
        self.left = max_bytes
        self.notes: list[str] = []

    def keep(self, parts: list[ContentPart]) -> list[ContentPart]:
        return [kept for part in parts if (kept := self._keep(part)) is not None]

    def _keep(self, part: ContentPart) -> ContentPart | None:
        if isinstance(part, ImagePart):
            if len(part.data) > self.left:
                self.notes.append(f"an image of {len(part.data)} bytes (base64) dropped")
                return None
            self.left -= len(part.data)
            return part
        text = part.text
        head = text[: self.left + 1]  # encode no more than can be kept: a character is at least one byte
        data = head.encode()
        if len(head) == len(text) and len(data) <= self.left:
            self.left -= len(data)
            return part
        kept = data[: self.left].decode("utf-8", errors="ignore")
        self.notes.append(f"text of {len(text)} characters cut to its first {len(kept)}")
        self.left = 0
        return TextPart(text=kept) if kept else None


def _content(block: types.ContentBlock) -> list[ContentPart]:
    if isinstance(block, types.TextContent):
        return [TextPart(text=block.text)]
    if isinstance(block, types.ImageContent):
        return [ImagePart(data=block.data, mime_type=block.mime_type)]
    if isinstance(block, types.AudioContent):
        return [TextPart(text=f"[audio ({block.mime_type}) omitted]")]
    if isinstance(block, types.ResourceLink):
        return [TextPart(text=f"[resource link: {block.uri}" + (f" ({block.name})" if block.name else "") + "]")]
    resource = block.resource
    if isinstance(resource, types.TextResourceContents):
        return [TextPart(text=f"[resource {resource.uri}]\n{resource.text}")]
    if (resource.mime_type or "").startswith("image/"):
        return [ImagePart(data=resource.blob, mime_type=resource.mime_type or "image/png")]
    return [TextPart(text=f"[binary resource {resource.uri} ({resource.mime_type or 'unknown type'}) omitted]")]
