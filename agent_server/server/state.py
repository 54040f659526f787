"""The server's long-lived state for one process: settings, store, model, tools, session locks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcp.server import ServerRequestContext

from agent_server.agent.context import AgentDeps
from agent_server.agent.locks import SessionLocks
from agent_server.errors import InvalidArgument
from agent_server.llm.base import LLMClient
from agent_server.mounts.toolset import MountManager
from agent_server.server.client_model import llm_for_request
from agent_server.settings import Settings
from agent_server.store.base import SessionStore
from agent_server.tools.base import Toolset
from agent_server.tools.registry import ToolRegistry
from agent_server.types import SessionInfo

TITLE_LENGTH = 60


@dataclass(kw_only=True)
class AppState:
    settings: Settings
    store: SessionStore
    llm: LLMClient | None
    """The fixed provider; None means each request uses the client's model (sampling)."""
    registry: ToolRegistry
    mounts: MountManager
    locks: SessionLocks = field(default_factory=SessionLocks)

    def deps(self, ctx: ServerRequestContext[Any, Any], tools: Toolset | None = None) -> AgentDeps:
        """What the agent layer needs to serve the request `ctx`."""
        llm = llm_for_request(self.llm, ctx)
        return AgentDeps(settings=self.settings, store=self.store, llm=llm, tools=tools or self.registry)

    async def resolve_session(self, session_id: str | None, *, create_title: str | None = None) -> str:
        """The given session (checked to exist), else the active one, else (if allowed) a new active one.

        Raises:
            SessionNotFound: `session_id` is unknown, or there is no active session and none may be created.
        """
        if session_id is not None:
            return (await self.store.get_session(session_id)).session_id
        active = await self.store.get_active()
        if active is not None:
            return active
        if create_title is None:
            raise InvalidArgument("there is no active session: pass session_id or create one with session_create")
        return (await self.create_session(title=_title_from(create_title), metadata={})).session_id

    async def create_session(self, *, title: str, metadata: dict[str, object]) -> SessionInfo:
        session = await self.store.create_session(title=title, metadata=metadata)
        await self.store.set_active(session.session_id)
        return session.model_copy(update={"active": True})


def _title_from(prompt: str) -> str:
    flat = " ".join(prompt.split())
    return flat if len(flat) <= TITLE_LENGTH else flat[: TITLE_LENGTH - 1] + "…"
