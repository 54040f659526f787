"""The server's state, built on first use: store, workspace tools, registry.

Nothing here is imported or opened until the first `tools/call`, so that starting the server and
answering `initialize` and `tools/list` cost no more than the SDK itself. Opening the store marks
turns left `running` by a dead process as `interrupted`; since every tool call waits for it, no
client can see the store before that has happened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from agent_server.llm.base import LLMClient
    from agent_server.mounts.toolset import MountManager
    from agent_server.server.state import AppState
    from agent_server.settings import Settings
    from agent_server.store.sqlite import SqliteStore


class LazyState:
    def __init__(self, settings: Settings, llm: LLMClient | None, mounts: MountManager | None) -> None:
        self._settings = settings
        self._llm = llm
        self._mounts = mounts
        self._lock = anyio.Lock()
        self._state: AppState | None = None
        self._store: SqliteStore | None = None

    async def get(self) -> AppState:
        """The state, opening the store and building the registry on the first call.

        Raises:
            StoreError: the store cannot be opened.
        """
        if self._state is not None:
            return self._state
        async with self._lock:
            if self._state is None:
                self._state = await self._build()
            return self._state

    async def _build(self) -> AppState:
        from agent_server.mounts.toolset import MountManager
        from agent_server.server.state import AppState
        from agent_server.store.sqlite import SqliteStore
        from agent_server.tools.builtin import WorkspaceToolset
        from agent_server.tools.registry import ToolRegistry

        settings = self._settings
        self._store = await SqliteStore.open(settings.state_path)
        mounts = self._mounts or MountManager([])
        workspace = WorkspaceToolset(
            settings.workspace,
            read_max_bytes=settings.read_file_max_bytes,
            search_max_matches=settings.search_max_matches,
            search_timeout_s=settings.search_timeout_s,
        )
        registry = ToolRegistry([workspace, mounts])
        return AppState(settings=settings, store=self._store, llm=self._llm, registry=registry, mounts=mounts)

    async def aclose(self) -> None:
        if self._store is not None:
            await self._store.close()
