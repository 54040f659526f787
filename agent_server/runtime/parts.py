"""The runtime's parts: what `AgentRuntime` opens and assembles (store, tools, mounts, locks), and the
small pieces its methods share. Part of the composition root: it builds the concrete built-in tools."""

from __future__ import annotations

import importlib
import math
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent_server.collector import paused as collector_paused
from agent_server.errors import InvalidArgument, SessionNotFound
from agent_server.settings import Settings
from agent_server.types import SessionInfo

if TYPE_CHECKING:
    from agent_server.agent.current_sessions import CurrentKey, CurrentSessions
    from agent_server.agent.locks import SessionLocks
    from agent_server.mounts.toolset import MountManager
    from agent_server.runtime.owners import SessionOwners, Waiting
    from agent_server.store.base import SessionStore, SharedStore, TurnLocks
    from agent_server.tools.base import Toolset
    from agent_server.tools.guidance import WorkspaceGuide
    from agent_server.tools.registry import ToolRegistry
    from agent_server.tools.sandbox import CommandSandbox
    from agent_server.tools.skills import SkillSources


@dataclass(frozen=True)
class SessionTools:
    """One session's own tools (ACP `session/new {cwd, mcpServers}`), made by `AgentRuntime.in_workspace`.

    The built-in tools confined to `workspace` instead of the settings' workspace, the configured mounts,
    and the servers the client gave for this session; turns run with it see its workspace's prompt files.
    """

    workspace: Path
    registry: ToolRegistry
    mounts: MountManager | None
    """The session's own mounted servers (None: the client gave none)."""
    settings: Settings
    """The runtime's settings with `workspace` replaced (the store stays where it was)."""
    guide: WorkspaceGuide
    """`project_guide(settings)`, made once."""


@dataclass(frozen=True)
class Parts:
    store: SessionStore
    registry: ToolRegistry
    mounts: MountManager | None
    """None when no servers are configured (the mount machinery is then never imported)."""
    locks: SessionLocks
    current: CurrentSessions
    shared: SharedStore | None
    """The store as several server processes share it (PostgreSQL), or None (SQLite, memory)."""
    owners: SessionOwners
    queued: Waiting
    """Each principal's turns waiting for an earlier turn of their session (`limits.queued_turns`)."""
    guide: WorkspaceGuide
    """The instructions and skills of the settings' workspace (`project_guide`), made once."""
    sandbox: CommandSandbox | None = None
    """Where `run_command` runs, for every workspace of the runtime; None when the tool is off."""
    turn_locks: TurnLocks | None = None
    """The store's session turn locks, shared by every process on it (SQLite, PostgreSQL); None (memory)."""


def make_current(parts: Parts, connection: CurrentKey | None, session: SessionInfo) -> SessionInfo:
    parts.current.set(connection, session.session_id)
    return marked(parts, connection, session)


def marked(parts: Parts, connection: CurrentKey | None, session: SessionInfo) -> SessionInfo:
    """`session` with `active` telling whether it is `connection`'s current session."""
    active = parts.current.get(connection) == session.session_id
    return session if session.active == active else session.model_copy(update={"active": active})


TURN_MODULES = (
    "agent_server.agent.turns",
    "agent_server.store.sqlite",
    "agent_server.tools.builtin",
    "agent_server.tools.guidance",
    "agent_server.tools.registry",
)
"""What the first turn imports (with what they import): loaded ahead by `prepare`."""


@asynccontextmanager
async def hold_session(
    parts: Parts, session_id: str, deadline: float = math.inf, on_busy: Callable[[], None] | None = None
) -> AsyncGenerator[bool]:
    """The session's lock in this process and, on a store other processes share, across them (`TurnLocks`);
    `on_busy` is told (once) when it has to wait for either."""
    told = False

    def busy() -> None:
        nonlocal told
        if on_busy is not None and not told:
            told = True
            on_busy()

    if parts.locks.busy(session_id):
        busy()
    async with parts.locks.hold(session_id, deadline=deadline) as held:
        if not held or parts.turn_locks is None:
            yield held
            return
        async with parts.turn_locks.hold_turn(session_id, deadline=deadline, on_busy=busy) as held_everywhere:
            yield held_everywhere


def import_turn_code() -> None:
    """Import what the first turn needs (in a worker thread: imports take tens of ms), the collector paused."""
    with collector_paused():
        for name in TURN_MODULES:
            importlib.import_module(name)


def ignore_wait(_what: str) -> None:
    """The wait callback of callers that do not care."""


async def session_exists(store: SessionStore, session_id: str) -> bool:
    try:
        await store.get_session(session_id)
    except SessionNotFound:
        return False
    return True


def workspace_root(workspace: Path) -> Path:
    """`workspace` resolved, checked to be an absolute path to a directory (blocking: file system)."""
    if not workspace.is_absolute() or not workspace.is_dir():
        raise InvalidArgument(f"workspace {str(workspace)!r} is not an absolute path to a directory")
    return workspace.resolve()


def workspace_tools(
    settings: Settings, root: Path, environ: Mapping[str, str], sandbox: CommandSandbox | None = None
) -> Toolset:
    """The built-in tools over `root` (the write and exec tools as the settings enable them)."""
    from agent_server.tools.builtin import WorkspaceToolset
    from agent_server.tools.instructions import InstructionLookup

    return WorkspaceToolset(
        root,
        read_max_bytes=settings.read_file_max_bytes,
        search_max_matches=settings.search_max_matches,
        search_timeout_s=settings.search_timeout_s,
        options=settings.tools,
        state_dir=settings.state_path,
        environ=environ,
        sandbox=sandbox,
        protected=[p.expanduser().absolute() for p in (settings.config_file, settings.mcp_config) if p],
        skills=skill_sources(settings, root) if settings.skills_max > 0 else None,
        instructions=InstructionLookup(root, settings.instruction_files, settings.instructions_max_bytes)
        if settings.instruction_files
        else None,
    )


def skill_sources(settings: Settings, root: Path) -> SkillSources:
    """Where the skills of the workspace `root` (resolved) are found, and the bounds of reading them."""
    from agent_server.tools.skills import SkillSources

    return SkillSources(
        workspace=root, dirs=settings.skills_dirs, limit=settings.skills_max, max_bytes=settings.skill_max_bytes
    )


def project_guide(settings: Settings) -> WorkspaceGuide:
    """The instructions and skills of `settings.workspace` (a session's own settings for its workspace)."""
    from agent_server.tools.guidance import WorkspaceGuide

    return WorkspaceGuide(
        skill_sources(settings, settings.workspace), settings.instruction_files, settings.instructions_max_bytes
    )


def command_sandbox(settings: Settings, environ: Mapping[str, str]) -> CommandSandbox | None:
    """The sandbox of `run_command` when it is on: it hides the state dir and the server's config files.

    Cheap (blocking only to resolve paths): it starts nothing; bwrap is probed at the first command."""
    if not settings.tools.exec:
        return None
    from agent_server.tools.sandbox import CommandSandbox

    hidden = [p for p in (settings.state_path, settings.config_file, settings.mcp_config) if p is not None]
    return CommandSandbox.from_options(settings.tools, hidden=[p.resolve() for p in hidden], environ=environ)


def all_mounts(parts: Parts, session_tools: SessionTools | None) -> list[MountManager]:
    """The configured mounts and the session's own, those that exist."""
    own = None if session_tools is None else session_tools.mounts
    return [m for m in (parts.mounts, own) if m is not None]


def unavailable_notes(mounts: MountManager) -> tuple[str, ...]:
    return tuple(
        f"The tools of MCP server {name!r} are unavailable this turn: {why}" for name, why in mounts.unavailable()
    )
