"""The server's long-lived state for one process: settings, store, model, tools, session locks,
and each connection's current session."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcp.server import ServerRequestContext

from agent_server.agent.context import AgentDeps
from agent_server.agent.locks import SessionLocks
from agent_server.errors import InvalidArgument, SessionNotFound
from agent_server.llm.base import LLMClient
from agent_server.mounts.toolset import MountManager
from agent_server.server.client_model import llm_for_request
from agent_server.server.connections import CurrentSessions, connection_key
from agent_server.server.streaming import one_line
from agent_server.server.tool_specs import NEW_SESSION
from agent_server.settings import Settings
from agent_server.store.base import SessionStore
from agent_server.tools.base import Toolset
from agent_server.tools.registry import ToolRegistry
from agent_server.types import SessionInfo

TITLE_LENGTH = 60
NO_CURRENT = "this connection has no current session: pass session_id, or create one with session_create"

Context = ServerRequestContext[Any, Any]


@dataclass(kw_only=True)
class AppState:
    settings: Settings
    store: SessionStore
    llm: LLMClient | None
    """The fixed provider; None means each request uses the client's model (sampling)."""
    registry: ToolRegistry
    mounts: MountManager
    locks: SessionLocks = field(default_factory=SessionLocks)
    current: CurrentSessions = field(default_factory=CurrentSessions)

    def deps(self, ctx: Context, tools: Toolset | None = None) -> AgentDeps:
        """What the agent layer needs to serve the request `ctx`."""
        llm = llm_for_request(self.llm, ctx)
        return AgentDeps(settings=self.settings, store=self.store, llm=llm, tools=tools or self.registry)

    async def session_for_turn(self, ctx: Context, session_id: str | None, *, prompt: str) -> str:
        """The session a turn runs in: the given one (checked), a fresh one for `new`, else the current one.

        The connection's first turn without `session_id` creates its current session, exactly once
        however many such calls arrive together. `new` does not change the current session.

        Raises:
            SessionNotFound: `session_id` is unknown.
        """
        if session_id == NEW_SESSION:
            return await self._create(_title_from(prompt))
        if session_id is not None:
            return (await self.store.get_session(session_id)).session_id
        key = connection_key(ctx)
        if key is None:  # no connection identity (2026-07-28 over HTTP): every such call starts fresh
            return await self._create(_title_from(prompt))
        return await self.current.get_or_create(key, self._exists, lambda: self._create(_title_from(prompt)))

    async def session_or_current(self, ctx: Context, session_id: str | None) -> str:
        """The given session (checked to exist), else the connection's current one.

        Raises:
            SessionNotFound: `session_id` is unknown.
            InvalidArgument: no `session_id` and the connection has no current session.
        """
        if session_id is not None:
            return (await self.store.get_session(session_id)).session_id
        current = self.current.get(connection_key(ctx))
        if current is None or not await self._exists(current):
            raise InvalidArgument(NO_CURRENT)
        return current

    async def create_session(self, ctx: Context, *, title: str, metadata: dict[str, object]) -> SessionInfo:
        """A new session, made the connection's current one."""
        session = await self.store.create_session(title=title, metadata=metadata)
        return self.make_current(ctx, session)

    def make_current(self, ctx: Context, session: SessionInfo) -> SessionInfo:
        key = connection_key(ctx)
        self.current.set(key, session.session_id)
        return self.marked(ctx, session)

    def marked(self, ctx: Context, session: SessionInfo) -> SessionInfo:
        """`session` with `active` telling whether it is this connection's current session."""
        active = self.current.get(connection_key(ctx)) == session.session_id
        return session if session.active == active else session.model_copy(update={"active": active})

    async def _create(self, title: str) -> str:
        return (await self.store.create_session(title=title, metadata={})).session_id

    async def _exists(self, session_id: str) -> bool:
        try:
            await self.store.get_session(session_id)
        except SessionNotFound:
            return False
        return True


def _title_from(prompt: str) -> str:
    return one_line(prompt, TITLE_LENGTH)
