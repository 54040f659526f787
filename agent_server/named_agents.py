"""Named agents: specialists a caller picks by name (`run_turn(agent=...)`, one MCP tool each, ACP session modes).

They are defined in the settings (`agents: {name: {...}}`, `settings.AgentSettings`) and by Markdown files of the
workspace, in Claude Code's format as it is: `.agents/agents/*.md` and `.claude/agents/*.md`, each a YAML front
matter (`name`, `description`, `tools`, `model`) and a body, the agent's system prompt. A name defined twice keeps
its first definition: the settings', then `.agents/agents/`, then `.claude/agents/` (each directory in file name
order). Unknown front matter keys are ignored with a log line; a file without a description, with an invalid
name, or too large (`MAX_FILE_BYTES`) is skipped with one.

`tools` (a comma-separated list or a YAML list) limits the agent's tools: built-in names and globs of mounted
tools, and Claude Code's names mapped to the built-ins (`CLAUDE_TOOLS`); `mcp__SERVER__TOOL` is the mounted
`SERVER__TOOL`. Another capitalised name (one of Claude Code's tools this server does not have, e.g. `WebFetch`)
is skipped with a log line. Absent: every tool. The front matter is read by `front_matter` (PyYAML), as
skills' is.

`AgentCatalog` reads the definitions when first asked and again when a file changed: a cheap check of the two
directories' and their files' modification times, in a worker thread (without either directory, two `stat`s and
no thread); each change of the set bumps its `version`.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.to_thread

from agent_server.front_matter import FrontMatterError, split_front_matter
from agent_server.settings import AgentSettings
from agent_server.turn_options import AGENT_NAME

logger = logging.getLogger(__name__)

AGENT_DIRS = (Path(".agents") / "agents", Path(".claude") / "agents")
MAX_FILE_BYTES = 256 * 1024
MAX_DESCRIPTION_CHARS = 4096
"""A description is cut there (it is a tool's description, which every host puts in its model's context)."""
MAX_FILES = 200
"""At most this many definition files are read per directory (in name order); the rest are skipped, logged."""
DEFAULT_AGENT = "default"
"""The name that means the server's own agent (no named agent): ACP's default mode; never a named agent."""
CLAUDE_TOOLS: dict[str, tuple[str, ...]] = {
    "Read": ("read_file",),
    "Grep": ("search_text",),
    "Glob": ("list_dir",),
    "LS": ("list_dir",),
    "Write": ("write_file",),
    "Edit": ("edit_file",),
    "MultiEdit": ("edit_file",),
    "Bash": ("run_command",),
}
"""Claude Code's tool names -> this server's built-in tools."""
KNOWN_KEYS = frozenset({"name", "description", "tools", "model"})
_NAME = re.compile(AGENT_NAME)


@dataclass(frozen=True)
class AgentDefinition:
    name: str
    description: str
    instructions: str = ""
    """The agent's system prompt (a file's body), added to the server's own."""
    tools: tuple[str, ...] | None = None
    """Tool names and globs the agent gets (mapped from Claude Code's names); None: every tool."""
    model: str | None = None
    """A `models` alias, a provider spec, or `inherit`/None: the server's model."""
    max_tool_passes: int | None = None
    output_schema: dict[str, Any] | None = None
    source: str = "settings"
    """`settings`, or the definition file's path relative to the workspace."""


@dataclass(frozen=True)
class Catalog:
    agents: dict[str, AgentDefinition] = field(default_factory=dict[str, AgentDefinition])
    version: int = 0


def from_settings(agents: Mapping[str, AgentSettings]) -> list[AgentDefinition]:
    if DEFAULT_AGENT in agents:
        logger.warning("settings agent %r: the name means the server's own agent; skipped", DEFAULT_AGENT)
    return [
        AgentDefinition(
            name=name,
            description=spec.description,
            instructions=spec.instructions,
            tools=None if spec.tools is None else map_tools(spec.tools, f"settings agent {name!r}"),
            model=spec.model,
            max_tool_passes=spec.max_tool_passes,
            output_schema=spec.output_schema,
        )
        for name, spec in agents.items()
        if name != DEFAULT_AGENT
    ]


def map_tools(names: tuple[str, ...] | list[str], where: str) -> tuple[str, ...]:
    """Tool names and globs as the agent's allow-list: Claude Code's names mapped, unknown ones skipped (logged)."""
    mapped: list[str] = []
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        if name in CLAUDE_TOOLS:
            mapped += CLAUDE_TOOLS[name]
        elif name.startswith("mcp__") and len(name) > len("mcp__"):
            mapped.append(name.removeprefix("mcp__"))
        elif name[0].isupper():
            logger.info("%s: tool %r is not one this server has; skipped", where, name)
        else:
            mapped.append(name)
    return tuple(dict.fromkeys(mapped))


def parse_agent_file(text: str, *, stem: str, source: str) -> AgentDefinition | None:
    """The definition a file holds, or None (logged) when it holds none that can be used."""
    try:
        values, body = split_front_matter(text)
    except FrontMatterError as exc:
        logger.info(
            "agent file %s has no usable front matter: %s (--- name/description --- then the prompt); skipped",
            source,
            exc,
        )
        return None
    for key in sorted(set(values) - KNOWN_KEYS):
        logger.info("agent file %s: front matter key %r is not used; ignored", source, key)
    name = values.get("name") if isinstance(values.get("name"), str) else stem
    description = values.get("description")
    if not isinstance(name, str) or not _NAME.match(name) or name == DEFAULT_AGENT:
        logger.info("agent file %s: name %r is not a usable agent name (%s); skipped", source, name, AGENT_NAME)
        return None
    if not isinstance(description, str) or not description.strip():
        logger.info("agent file %s: no description (hosts pick agents by it); skipped", source)
        return None
    tools: object = values.get("tools")
    if isinstance(tools, str):
        tools = tools.split(",")
    elif tools is not None and not isinstance(tools, list):
        logger.info("agent file %s: tools is neither a list nor comma-separated names; skipped", source)
        return None
    model = values.get("model")
    return AgentDefinition(
        name=name,
        description=description.strip()[:MAX_DESCRIPTION_CHARS],
        instructions=body.strip(),
        tools=None if tools is None else map_tools([str(t) for t in cast(list[object], tools)], f"agent file {source}"),
        model=model if isinstance(model, str) and model.strip() else None,
        source=source,
    )


Signature = tuple[tuple[str, int, int], ...]


class AgentCatalog:
    """The named agents of one workspace (see the module docstring)."""

    def __init__(self, workspace: Path, configured: Mapping[str, AgentSettings]) -> None:
        self._workspace = workspace
        self._dirs = [str(workspace / d) for d in AGENT_DIRS]
        self._configured = from_settings(configured)
        self._signature: Signature | None = None
        self._catalog = Catalog()
        self._lock = anyio.Lock()

    async def current(self) -> Catalog:
        """The definitions, read again when a file changed since the last call."""
        async with self._lock:
            if not any(map(os.path.isdir, self._dirs)):  # the usual case: no thread hop
                signature: Signature = ()
                read: list[AgentDefinition] | None = None if signature == self._signature else []
            else:
                signature, read = await anyio.to_thread.run_sync(self._scan, self._signature)
            if read is not None:
                self._update(signature, read)
            return self._catalog

    def _scan(self, known: Signature | None) -> tuple[Signature, list[AgentDefinition] | None]:
        """The files' signature and, when it changed, their definitions (blocking: a worker thread)."""
        paths = [path for d in AGENT_DIRS for path in _definition_files(self._workspace / d)]
        stats: list[tuple[str, int, int]] = []
        for path in paths:
            try:
                stat = path.stat()
            except OSError:
                continue
            stats.append((str(path), stat.st_mtime_ns, stat.st_size))
        signature = tuple(stats)
        if signature == known:
            return signature, None
        read: list[AgentDefinition] = []
        for path in paths:
            text = _read(path)
            source = str(path.relative_to(self._workspace))
            definition = None if text is None else parse_agent_file(text, stem=path.stem, source=source)
            if definition is not None:
                read.append(definition)
        return signature, read

    def _update(self, signature: Signature, read: list[AgentDefinition]) -> None:
        found: dict[str, AgentDefinition] = {}
        for definition in [*self._configured, *read]:
            if definition.name in found:
                logger.info("agent %r of %s: defined already (%s); skipped", definition.name, definition.source,
                            found[definition.name].source)  # fmt: skip
                continue
            found[definition.name] = definition
        self._signature = signature
        if found != self._catalog.agents:
            self._catalog = Catalog(found, self._catalog.version + 1)


def _definition_files(directory: Path) -> list[Path]:
    try:
        entries = sorted(e.name for e in os.scandir(directory) if e.name.endswith(".md") and e.is_file())
    except OSError:
        return []
    if len(entries) > MAX_FILES:
        logger.info("%s holds %d agent files; only the first %d are read", directory, len(entries), MAX_FILES)
    return [directory / name for name in entries[:MAX_FILES]]


def _read(path: Path) -> str | None:
    try:
        with path.open("rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        logger.info("agent file %s cannot be read: %s; skipped", path, exc.strerror)
        return None
    if len(data) > MAX_FILE_BYTES:
        logger.info("agent file %s is larger than %d bytes; skipped", path, MAX_FILE_BYTES)
        return None
    return data.decode("utf-8", errors="replace")
