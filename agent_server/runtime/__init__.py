"""`AgentRuntime`: the agent as a library, and the one place that picks concrete parts.

It owns the session store, the tool registry (built-in workspace tools and mounted MCP servers),
the session locks, each connection's current session, the model choice and the turn defaults.
Every front door (the MCP server in `server/`, the ACP one in `acp/`, both over the kit in `doors/`, or a
Python program) is a thin adapter over it:

```python
from agent_server import AgentRuntime, Settings
from agent_server.testing import ScriptedLLM

async with AgentRuntime(Settings(workspace="."), llm=ScriptedLLM([{"content": "Hello."}])) as runtime:
    record = await runtime.run_turn("Say hello")
    answer = record.final_text
```

Start-up stays cheap: entering the runtime starts the mounted servers in the background and
imports nothing else; the store, the workspace tools and the turn machinery are loaded by the
first call that needs them (opening the store marks turns left `running` by a dead process as
`interrupted`, before any call sees the store).

A *connection* is whatever the front door says it is (DESIGN 3.5): `DEFAULT_CONNECTION` for a
Python program, the server process on stdio, one MCP session over HTTP; `None` means a call
without connection identity, which never has a current session. No MCP types here.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import gc
import logging
import math
import os
from collections.abc import AsyncGenerator, Callable, Generator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from agent_server.collector import resume_after_start
from agent_server.errors import AgentServerError, InvalidArgument, SessionNotFound, TurnLockLost, TurnNotFound
from agent_server.events import AgentEvent, EventIds, EventSink, listening
from agent_server.ids import check_ids
from agent_server.llm.unavailable import CONFIGURE
from agent_server.named_agents import DEFAULT_AGENT, AgentDefinition
from agent_server.redaction import redact_url
from agent_server.runtime import progress
from agent_server.runtime.agents import AGENT_KEY, NamedAgents, agent_part, checked_schema, with_agent
from agent_server.runtime.background import BackgroundTurns, TurnHandle
from agent_server.runtime.choice import fixed_llm, store_opener
from agent_server.runtime.live import LiveFeed, Watch
from agent_server.runtime.owners import SessionOwners, Waiting, check_principal
from agent_server.runtime.parts import (
    TURN_MODULES,
    Parts,
    SessionTools,
    all_mounts,
    command_sandbox,
    hold_session,
    ignore_wait,
    import_turn_code,
    make_current,
    marked,
    project_guide,
    session_exists,
    unavailable_notes,
    workspace_root,
    workspace_tools,
)
from agent_server.settings import Settings
from agent_server.telemetry import NO_TELEMETRY, Telemetry, TurnTrace, turn_trace_id
from agent_server.tracing import tracing_on
from agent_server.turn_options import ClientModel, TurnOptions
from agent_server.types import (
    LOCAL_PRINCIPAL,
    UNTITLED,
    CompactionRecord,
    DroppedTool,
    PendingApproval,
    ProjectGuidance,
    SessionHistory,
    SessionInfo,
    StoredMessage,
    ToolSpec,
    TurnRecord,
    new_id,
    title_from,
    utc_now,
)

if TYPE_CHECKING:
    from agent_server.agent.context import AgentDeps
    from agent_server.agent.current_sessions import CurrentKey
    from agent_server.agent.progress import ProgressKeeper
    from agent_server.approvals import ApprovalChannel
    from agent_server.llm.base import LLMClient
    from agent_server.mounts.config import MountConfig
    from agent_server.mounts.toolset import MountManager
    from agent_server.mounts.transport import InProcessServer
    from agent_server.named_agents import Catalog
    from agent_server.runtime.park import InputRequest, Park, ParkedApprovals
    from agent_server.runtime.web_approvals import WebApprovals
    from agent_server.store.base import SharedTask
    from agent_server.tools.base import Toolset
    from agent_server.tools.sandbox import SandboxState
    from agent_server.tracing.setup import Tracing

__all__ = [
    "AGENT_KEY",
    "CONFIGURE",
    "DEFAULT_AGENT",
    "DEFAULT_CONNECTION",
    "NEW_SESSION",
    "AgentDefinition",
    "AgentRuntime",
    "ClientModel",
    "InputRequest",
    "Park",
    "ParkedApprovals",
    "TURN_MODULES",
    "ToolsReport",
    "TurnHandle",
    "TurnOptions",
    "fixed_llm",
]

logger = logging.getLogger(__name__)

_PARK_NAMES = frozenset({"InputRequest", "Park", "ParkedApprovals"})
"""Exported from `runtime/park.py` on first use: a turn parks rarely, and start-up imports nothing it need not."""


def __getattr__(name: str) -> Any:
    if name not in _PARK_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from agent_server.runtime import park

    return getattr(park, name)


DEFAULT_CONNECTION = "default"
NEW_SESSION = "new"
"""`run_turn(session_id="new")`: run in a fresh session (the current one stays)."""
NO_CURRENT = "this connection has no current session: pass session_id, or create one with session_create"
SAMPLING_MAX_TOKENS = 4096
CANCEL_WAIT_S = 10.0
"""How long `cancel_turn` waits for the cancelled turn to store its record (it takes well under a second)."""

WaitCallback = Callable[[str], None]
"""Told what a call waits on before its turn starts (mounted servers starting, an earlier turn)."""


@dataclass(frozen=True)
class ToolsReport:
    """The agent's tools, each mounted server's state (`name`, `transport`, `state`, `error`, `tool_count`),
    and the tools dropped (clashing names, invalid schemas) with the reason."""

    tools: list[ToolSpec]
    servers: list[dict[str, Any]]
    dropped: list[DroppedTool]
    sandbox: SandboxState | None = None
    """Where `run_command` runs (`mode`, `reason`, `network`); None when the tool is off."""
    guidance: ProjectGuidance | None = None
    """The workspace's instruction file and skills, as a turn starting now would find them."""


@dataclass
class _Shared:
    """What every view of one runtime (`AgentRuntime.as_principal`) shares: its parts, as they are opened."""

    stack: AsyncExitStack | None = None
    started_mounts: MountManager | None = None
    parts: Parts | None = None
    background: BackgroundTurns | None = None
    entries: int = 0
    tracing: Tracing | None = None
    """OpenTelemetry, while the runtime is entered with tracing on (`agent_server.tracing`)."""
    opening: anyio.Lock = field(default_factory=anyio.Lock)
    running: dict[str, anyio.CancelScope] = field(default_factory=dict[str, anyio.CancelScope])
    """turn id -> the scope a cancel request from another process cancels (see `_cancel_here`)."""
    live: dict[str, tuple[str, TurnRecord]] = field(default_factory=dict[str, tuple[str, TurnRecord]])
    """turn id -> (principal, the record so far) of every turn running in this process (`runtime.progress`)."""
    feed: LiveFeed = field(default_factory=LiveFeed)
    """The events of this process's turns, for the web view's pages (`watch_turns`)."""
    view_url: str | None = None
    """Where this process serves the web view (`serve_view_at`), for the stderr line of a web question."""
    web: WebApprovals | None = None
    progress: ProgressKeeper | None = None
    """Writes every running turn's record to the store as it goes, while the runtime is entered with a
    `view.progress_interval_s` above 0."""


class _PublishedSink:
    """A turn's events to its caller's sink and to the pages that watch the principal's turns (`LiveFeed`);
    nobody listens when the caller discards them and no page watches."""

    def __init__(self, feed: LiveFeed, principal: str, on_event: EventSink) -> None:
        from agent_server.agent.context import DISCARD

        self._feed, self._principal, self._on_event = feed, principal, on_event
        self._discarded = on_event is DISCARD

    def listening(self) -> bool:
        caller = not self._discarded and listening(self._on_event)
        return caller or self._feed.watched(self._principal)

    async def __call__(self, event: AgentEvent) -> None:
        self._feed.publish(self._principal, event)
        await self._on_event(event)


class AgentRuntime:
    """See the module docstring. Use as `async with AgentRuntime(settings) as runtime:`."""

    def __init__(
        self,
        settings: Settings,
        *,
        llm: LLMClient | None = None,
        in_process_mounts: Mapping[str, InProcessServer] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        """Check the settings now; nothing starts until the runtime is entered.

        Args:
            llm: the model, instead of the one the settings name (e.g. `agent_server.testing.ScriptedLLM`).
            in_process_mounts: connect these mounts (by name) to in-process MCP servers (tests, embedding).
            environ: where `OPENAI_*` and `AGENT_SERVER_MODEL` come from, and the minimal environment of
                mounted stdio servers (default `os.environ`; mounts' `${VAR}` were expanded by the settings).

        Raises:
            ConfigError: the settings name a model or mounts that cannot be built, or ask for traces
                without the `otel` extra.
        """
        env = os.environ if environ is None else environ
        self._traced = tracing_on(settings, env)
        self.settings = settings
        self._llm = llm if llm is not None else fixed_llm(settings, env)
        self._open_store = store_opener(settings)
        self._mount_configs = list(settings.mcp_servers.values())  # checked when the settings loaded
        self._in_process = dict(in_process_mounts or {})
        self._environ = env
        self._shared = _Shared()
        self._principal = LOCAL_PRINCIPAL
        self._session_tools: SessionTools | None = None
        """The tools of `in_workspace` (a view of this runtime), else None: the runtime's own."""
        self._agents = NamedAgents(settings, env)

    @property
    def principal(self) -> str:
        """Whom this runtime's calls are made for: `local` unless `as_principal` says otherwise."""
        return self._principal

    def as_principal(self, principal: str) -> AgentRuntime:
        """This runtime acting for `principal` (DESIGN 3.10; see `agent_server.runtime.owners`).

        The view shares everything with this runtime (store, tools, mounts, background turns; entering it enters
        this one), but what its calls make belongs to `principal`, and they reach only `principal`'s sessions,
        turns, background turns and shared tasks: another principal's are "not found", exactly as unknown ids.
        Its background turns, turns waiting for the client and queued turns count against `principal`'s own
        limits (settings `limits`). The runtime itself acts for `local`.

        Raises:
            InvalidArgument: `principal` cannot be a principal's name (1 to 256 characters, none a control one).
        """
        if principal == self._principal:
            return self
        view = copy.copy(self)
        view._principal = check_principal(principal)
        return view

    @property
    def has_model(self) -> bool:
        """Whether a model is configured; otherwise each call needs the caller's own (`client_model`)."""
        return self._llm is not None

    # --- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> AgentRuntime:
        # Re-entrant: an in-process MCP server enters its lifespan once per client. Only the outermost
        # entry starts and stops the parts (the background task group must exit where it was entered).
        self._shared.entries += 1
        if self._shared.entries > 1:
            return self
        resume_after_start()
        stack = AsyncExitStack()
        await stack.__aenter__()
        self._shared.stack = stack
        if self._traced:  # exits last: the spans of everything below are flushed
            from agent_server.tracing import opened

            provider = self._llm.name if self._llm is not None else None
            self._shared.tracing = await stack.enter_async_context(
                opened(self.settings, self._environ, provider=provider)
            )
        if self._mount_configs:
            from agent_server.mounts.toolset import MountManager

            manager = MountManager(
                self._mount_configs,
                environ=self._environ,
                in_process=self._in_process,
                result_max_bytes=self.settings.mount_result_max_bytes,
            )
            self._shared.started_mounts = await stack.enter_async_context(manager)
        stack.push_async_callback(self._close_store)
        # Exits first: background turns are cancelled (and recorded) while the store and mounts are still up.
        limits = self.settings.limits
        background = BackgroundTurns(
            self._stored_turn,
            write=self._store_unbegun,
            max_running=limits.background_turns,
            max_parked=limits.parked_turns,
            heartbeat_s=self.settings.heartbeat_s,
        )
        self._shared.background = await stack.enter_async_context(background)
        interval = self.settings.view.progress_interval_s
        if interval > 0:
            from agent_server.agent.progress import ProgressKeeper

            keeper = self._shared.progress = ProgressKeeper(interval)
            background.start_service(keeper.run)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        shared = self._shared
        stack = shared.stack
        assert stack is not None, "the runtime was not entered"
        shared.entries -= 1
        if shared.entries:
            return None
        shared.stack, shared.background, shared.tracing, shared.progress = None, None, None, None
        return await stack.__aexit__(exc_type, exc, tb)

    async def _close_store(self) -> None:
        shared = self._shared
        parts, shared.parts = shared.parts, None  # entered again later, the runtime opens a fresh store
        if parts is not None:
            await parts.store.close()

    async def prepare(self) -> None:
        """Load the turn machinery and open the store now rather than at the first call that needs them.

        The imports run in a worker thread, so a front door can call this in the background as it starts
        (the MCP server does) and go on answering the handshake meanwhile. Idempotent.

        Once loaded, the heap so far (modules, the protocol libraries' models: most of the process) is frozen out
        of the cyclic garbage collector (`gc.freeze`): its full collections walked all of it, holding the event
        loop for 100 ms and more in a busy server (`bench/loop_lag.py`); those objects live as long as the
        process anyway.

        Raises:
            StoreError: the store cannot be opened (a later call tries again).
        """
        await anyio.to_thread.run_sync(import_turn_code)
        await self._ready()
        await self.agent_catalog()  # the named agents' definitions, read before the first call needs them
        gc.freeze()

    async def _ready(self) -> Parts:
        """The store and the tools, opened and built by the first call that needs them.

        Raises:
            StoreError: the store cannot be opened (the next call tries again).
        """
        if self._shared.parts is not None:
            return self._shared.parts
        async with self._shared.opening:
            if self._shared.parts is None:
                self._shared.parts = await self._open()
            return self._shared.parts

    async def _open(self) -> Parts:
        from agent_server.agent.current_sessions import CurrentSessions
        from agent_server.agent.locks import SessionLocks
        from agent_server.store.base import SharedStore, TurnLocks
        from agent_server.tools.registry import ToolRegistry

        settings = self.settings
        store = await self._open_store()
        shared = store if isinstance(store, SharedStore) else None
        if shared is not None and self._shared.background is not None:
            self._shared.background.start_service(lambda: shared.serve_notifications(self._cancel_here))
        mounts = self._shared.started_mounts
        sandbox = None  # run_command's, shared by every workspace; made in a worker thread: it resolves paths
        if settings.tools.exec:
            sandbox = await anyio.to_thread.run_sync(command_sandbox, settings, self._environ)
        workspace = workspace_tools(settings, settings.workspace, self._environ, sandbox)
        toolsets = [workspace] if mounts is None else [workspace, mounts]
        return Parts(
            store=store,
            registry=ToolRegistry(toolsets),
            mounts=mounts,
            locks=SessionLocks(),
            current=CurrentSessions(),
            shared=shared,
            sandbox=sandbox,
            owners=SessionOwners(),
            queued=Waiting(settings.limits.queued_turns, "for an earlier turn of their session", "limits.queued_turns"),
            turn_locks=store if isinstance(store, TurnLocks) else None,
            guide=project_guide(settings),
        )

    # --- turns ----------------------------------------------------------------------------

    async def run_turn(
        self,
        prompt: str,
        *,
        session_id: str | None = None,
        connection: str | None = DEFAULT_CONNECTION,
        on_event: EventSink | None = None,
        on_wait: WaitCallback | None = None,
        on_progress: Callable[[TurnRecord], None] | None = None,
        options: TurnOptions | None = None,
    ) -> TurnRecord:
        """Run one agent turn and return its stored record, however it ended.

        `session_id`: an existing session, `"new"` for a fresh one, or None for the connection's current
        session (created by its first such call, exactly once). `options` (`TurnOptions`): the turn's limits,
        trace mode, model and tools, and what the caller lends it: `approvals`, how this call's user is asked
        to approve tool calls (DESIGN 3.7; None: nobody can be asked, and calls that need approval follow
        `approvals.headless`, by default denied), its trace id and its own model. Its `timeout_s` (default: the
        settings' `turn_timeout_s`) is one deadline from now: waiting for mounted servers and for an earlier
        turn of the session count too. Cancelling the caller cancels the turn; it is recorded `cancelled`.
        `on_wait` is told what the call waits for before its turn begins, when it has to wait (mounted servers
        starting, an earlier turn of the session, in this process or another); `on_progress` each new record of
        the running turn (its progress so far, also kept for `find_turn` and `list_turns`). With
        `approvals.web`, calls nobody can be asked about (or, with `"always"`, every call) are asked in the web
        view. `options.trace_context`: the caller's W3C trace context, which the turn's trace continues
        (README "Traces").

        Raises:
            SessionNotFound: `session_id` is unknown.
            StoreError: the store cannot be used.
        """
        return await self._run_turn(
            prompt, session_id, connection, on_event, on_wait, on_progress=on_progress, options=options or TurnOptions()
        )

    async def _run_turn(  # noqa: PLR0913 - the public entry's parameters, and the background turn's own
        self,
        prompt: str,
        session_id: str | None,
        connection: str | None,
        on_event: EventSink | None,
        on_wait: WaitCallback | None,
        *,
        options: TurnOptions,
        on_progress: Callable[[TurnRecord], None] | None = None,
        turn_id: str | None = None,
        park: Park | None = None,
        begun: bool = False,
        turn_trace: TurnTrace | None = None,
    ) -> TurnRecord:
        """`run_turn`, and the run of a background turn (`start_turn`): `turn_id`, the id it was given; `park`,
        whose expiry (not a cancel of the caller's) the record then names as the reason it was cancelled;
        `begun`: its `running` record is stored already; `turn_trace`: the trace `start_turn` began for it."""
        from agent_server.agent.context import DISCARD, TurnRequest
        from agent_server.agent.turns import run_turn

        check_ids(session_id=session_id, turn_id=turn_id)
        session_tools = self._session_tools
        timeout = options.timeout_s or self.settings.turn_timeout_s
        deadline = math.inf if timeout is None else anyio.current_time() + timeout
        wait = on_wait or ignore_wait
        parts = await self._ready()
        await checked_schema(options)
        agent = await self._agents.chosen(self.workspace, options.agent)
        if agent is not None:
            self._agents.model(agent)  # a model that cannot be built fails the call before a session is made
        session = await self._session_for_turn(parts, session_id, connection, prompt, agent)
        if options.agent is None:
            agent = await self._remembered_agent(parts, session)
        options = with_agent(options, agent)
        mounts = all_mounts(parts, session_tools)
        if any(manager.starting for manager in mounts):
            wait(progress.MOUNTS)
        with anyio.CancelScope(deadline=deadline):  # each mount also stops at its own startup timeout
            for manager in mounts:
                await manager.wait_started()
        turn_id = turn_id or new_id("turn")
        busy = functools.partial(wait, progress.EARLIER_TURN)
        traced = turn_trace or self._telemetry.turn(options.trace_context, model=options.model)
        traced.began(session_id=session, turn_id=turn_id)
        trace_id = turn_trace_id(traced, options.trace_context, options.trace_id) or new_id("trace")
        ids: EventIds = {"turn_id": turn_id, "session_id": session, "trace_id": trace_id}
        options = options.model_copy(update={"approvals": self._approvals_for(parts, options.approvals, ids)})
        on_event = self._published(on_event or DISCARD)
        try:
            async with self._hold_queued(parts, session, deadline, counted=not begun, on_busy=busy):
                passes = options.max_tool_passes
                request = TurnRequest(
                    prompt=prompt,
                    session_id=session,
                    options=options,
                    trace_id=trace_id,
                    max_tool_passes=self.settings.max_tool_passes if passes is None else passes,
                    timeout_s=timeout,
                    deadline=deadline,
                    notes=tuple(note for manager in mounts for note in unavailable_notes(manager)),
                    turn_id=turn_id,
                    cancel_reason=None if park is None else (lambda: park.expired),
                    begun=begun,
                    on_progress=self._tracker(turn_id, on_progress),
                    instructions=None if agent is None else agent_part(agent),
                )
                registry = parts.registry if session_tools is None else session_tools.registry
                tools = registry.filtered(options.tools, None if agent is None else agent.tools)
                deps = self._deps(parts, options.client_model, tools, agent)
                scope = self._shared.running[turn_id] = anyio.CancelScope()
                try:
                    with scope, traced.running():
                        record = await run_turn(deps, request, on_event)
                        traced.finish(record)
                        return record
                finally:
                    del self._shared.running[turn_id]
                    self._shared.live.pop(turn_id, None)
                # Only a cancel request through the shared store (`_cancel_here`) gets here: the turn stored its
                # `cancelled` record (shielded) before it stopped.
                return await parts.store.get_turn(session, turn_id)
        except TurnLockLost as lost:  # the store recorded the turn as stopped (`failed`): return that record
            try:
                return await parts.store.get_turn(session, turn_id)
            except TurnNotFound:  # lost before the turn began
                raise lost from None
        finally:
            traced.end()

    def _tracker(self, turn_id: str, also: Callable[[TurnRecord], None] | None) -> Callable[[TurnRecord], None]:
        """The turn's progress callback: keep its record so far while it runs, forget it once the final one is
        stored (the store has it: `find_turn` reads it there), and tell `also`."""
        live = self._shared.live

        def progressed(record: TurnRecord) -> None:
            if record.finished_at is None:
                live[turn_id] = (self._principal, record)
            else:
                live.pop(turn_id, None)
            if also is not None:
                also(record)

        return progressed

    async def start_turn(
        self,
        prompt: str,
        *,
        session_id: str | None = None,
        connection: str | None = DEFAULT_CONNECTION,
        options: TurnOptions | None = None,
        park: Park | None = None,
    ) -> TurnHandle:
        """Start a turn in the background and return its handle at once (its record says `running`).

        The turn runs in the runtime's task group, bounded by its `timeout_s` like any turn; leaving the
        runtime cancels it (recorded `cancelled`). Its events are kept (bounded, see
        `agent_server.runtime.background`) for `TurnHandle.follow`. The session is resolved now, so an
        unknown `session_id` fails here, and the turn is durably begun: its `running` record is stored
        before this returns (a process that dies with it leaves it to be marked `interrupted`), also when
        it queues behind another turn of its session (it begins later; ended before it began, e.g.
        cancelled, its record says so).
        Its trace (tracing on) begins here, so its queueing counts; `trace_context` as for `run_turn`.
        It needs a configured model, or the caller's own reachable through the turn's `park`
        (`client_model`, 2026-07-28): otherwise the caller's model is reachable only while its call is open.
        `park` (`new_park`): where the turn waits for its client; the turn ends `cancelled` when it gives up.
        A background turn outlives the request that started it, so the `approvals` it is lent must stay
        reachable: a `ParkedApprovals` over `park`, or a program's own.

        Raises:
            SessionNotFound: `session_id` is unknown.
            InvalidArgument: no model is configured, or too many background turns are running.
        """
        check_ids(session_id=session_id)
        options = options or TurnOptions()
        lent = options.client_model
        if self._llm is None and (lent is None or lent.requester is None or park is None):
            raise InvalidArgument(
                "a background turn needs a configured model (the caller's own model is only reachable "
                "while its request is open): " + CONFIGURE
            )
        background = self._entered_background()
        background.check_room(self._principal, parked=park is not None)  # before a session is made for it
        parts = await self._ready()
        await checked_schema(options)
        agent = await self._agents.chosen(self.workspace, options.agent)
        if agent is not None:
            self._agents.model(agent)  # a model that cannot be built fails the call before a session is made
        session = await self._session_for_turn(parts, session_id, connection, prompt, agent)
        traced = self._telemetry.turn(options.trace_context, model=options.model)  # from now: queueing counts
        trace_id = turn_trace_id(traced, options.trace_context, options.trace_id) or new_id("trace")
        options = options.model_copy(update={"trace_id": trace_id})
        record = TurnRecord(
            turn_id=new_id("turn"),
            session_id=session,
            trace_id=options.trace_id or "",
            status="running",
            prompt=prompt,
            trace=options.trace,
            model=options.model,
            started_at=utc_now(),
        )

        async def turn(on_event: EventSink) -> TurnRecord:
            return await self._run_turn(
                prompt,
                session,
                connection,
                on_event,
                handle.waiting_on,
                on_progress=handle.progressed,
                options=options,
                turn_id=record.turn_id,
                park=park,
                begun=True,
                turn_trace=traced,
            )

        # Its place is taken before its `running` record is stored (no await between the room check and the
        # taking), so that concurrent starts never store a record of a turn with no room to run.
        handle = background.admit(record, park, principal=self._principal)
        try:
            if not await parts.store.finish_turn(record, []):  # stored `running`, with no messages yet
                raise SessionNotFound(session)
        except BaseException:
            background.withdraw(handle)
            traced.end()
            raise
        background.launch(handle, turn)
        return handle

    def new_park(self) -> Park:
        """A park for one background turn (`start_turn(park=...)`), bounded by `park_timeout_s`."""
        from agent_server.runtime.park import Park

        return Park(timeout_s=self.settings.park_timeout_s)

    # --- the web view ---------------------------------------------------------------------

    def _approvals_for(self, parts: Parts, channel: ApprovalChannel | None, ids: EventIds) -> ApprovalChannel | None:
        """The turn's channel: the web view's when `approvals.web` says so (always, or for want of another)."""
        web = self.settings.approvals.web
        if web is False or (web is True and channel is not None):
            return channel
        feed, principal = self._shared.feed, self._principal
        return self._web().channel(
            parts.store,
            principal=principal,
            ids=ids,
            timeout_s=self.settings.approvals.timeout_s,
            on_posted=lambda event: feed.publish(principal, event),
        )

    def _web(self) -> WebApprovals:
        if self._shared.web is None:
            from agent_server.runtime.web_approvals import WebApprovals

            self._shared.web = WebApprovals(self._view_hint)
        return self._shared.web

    def _view_hint(self) -> str:
        if self._shared.view_url is not None:
            return f"open {self._shared.view_url}"
        where = f"--store {redact_url(self.settings.store_url)}" if self.settings.store_url else ""
        where = where or f"--state-dir {self.settings.state_path}"
        return f"run `agent-server view {where}` and open the page it prints"

    def _published(self, on_event: EventSink) -> EventSink:
        return _PublishedSink(self._shared.feed, self._principal, on_event)

    def serve_view_at(self, url: str) -> None:
        """Say that this process serves the web view at `url` (the stderr line of each web question names it)."""
        self._shared.view_url = url

    def can_watch_turns(self) -> bool:
        """Whether one more page may watch (`watch_turns`)."""
        return self._shared.feed.has_room()

    @contextlib.contextmanager
    def watch_turns(self) -> Generator[Watch]:
        """The events of the principal's turns that run in this process, as they happen, while the block runs.

        Raises:
            TooManyWatchers: too many pages watch already (`agent_server.runtime.live`).
        """
        with self._shared.feed.watch(self._principal) as watch:
            yield watch

    async def pending_approvals(self) -> list[PendingApproval]:
        """The principal's questions waiting in the web view, of every process on the store, oldest first."""
        return await (await self._ready()).store.pending_questions(self._principal)

    async def answer_approval(self, question_id: str, choice: str) -> bool:
        """Answer a question of the web view (`allow_once`, `allow_session`, `deny`); False when it is not the
        principal's, was answered, has expired or is gone, or `choice` is not one it offers.

        Raises:
            StoreError: the store cannot be used.
        """
        check_ids(question_id=question_id)
        parts = await self._ready()
        pending = {q.question_id: q for q in await parts.store.pending_questions(self._principal)}
        question = pending.get(question_id)
        if question is None or choice not in question.choices:
            return False
        return await self._web().answer(parts.store, question_id, choice, principal=self._principal)

    def background_turn(self, turn_id: str) -> TurnHandle | None:
        """The handle of a background turn of this runtime's principal (running, or among the recently finished)."""
        handle = self._entered_background().get(turn_id)
        return handle if handle is not None and handle.principal == self._principal else None

    async def find_turn(self, turn_id: str, session_id: str | None = None) -> TurnRecord:
        """A turn's latest record: a background turn of this runtime's, else the stored one (of `session_id`
        when given, else found by its id alone among the principal's sessions).

        Raises:
            TurnNotFound: no such turn of the principal's.
            SessionNotFound: `session_id` is unknown (or another principal's).
        """
        check_ids(turn_id=turn_id, session_id=session_id)
        handle = self.background_turn(turn_id)
        if handle is not None:
            return await self._unless_ended_in_store(handle.record)
        live = self._live_record(turn_id)
        if live is not None and session_id in (None, live.session_id):
            return await self._unless_ended_in_store(live)
        if session_id is not None:
            return await self.get_turn(session_id, turn_id)
        found = await (await self._ready()).store.find_turn(turn_id, principal=self._principal)
        if found is None:
            raise TurnNotFound(None, turn_id)
        return found

    async def _unless_ended_in_store(self, here: TurnRecord) -> TurnRecord:
        """`here`, the record of a turn running in this process; with a store other processes share, the
        stored record instead once that has ended. Another process may have read it there already (a cancel
        or a `turn_wait` through another replica), and this one must not say `running` after it said
        `cancelled`: the turn's task here hears of its own commit a moment later than the others may."""
        if here.finished_at is not None or self.settings.store_url is None:
            return here
        if (await self._ready()).shared is None:
            return here
        stored = await self._stored_turn(here.session_id, here.turn_id)
        return stored if stored is not None and stored.status != "running" else here

    def running_text(self, record: TurnRecord, *, last_event: int | None = None) -> str:
        """The text of a `running` result (`runtime.progress`): where the turn is and what it did so far, as
        this process sees it; a turn another process runs is its stored record, and the text says so.
        `last_event`: the last event of the turn a `turn_wait` sent, which the text tells how to continue after."""
        handle = self.background_turn(record.turn_id)
        if handle is not None and not handle.done:
            return progress.running_text(handle.record, where=handle.where, last_event=last_event)
        here = self._live_record(record.turn_id)
        where = None if here is not None else progress.ELSEWHERE
        return progress.running_text(here or record, where=where, last_event=last_event)

    async def wait_stored_turn(self, turn_id: str, session_id: str | None, *, timeout_s: float) -> TurnRecord:
        """A turn this runtime does not follow (see `find_turn`): its record; with a store several processes
        share, once it has ended where it runs, or the `running` record after `timeout_s`.

        Raises:
            TurnNotFound, SessionNotFound: as `find_turn`.
        """
        record = await self.find_turn(turn_id, session_id)
        shared = (await self._ready()).shared
        if record.status != "running" or shared is None:
            return record
        return await shared.wait_ended(record.session_id, turn_id, timeout_s)

    async def cancel_turn(self, turn_id: str, *, timeout_s: float = CANCEL_WAIT_S) -> TurnRecord:
        """Cancel a running background turn and return its record once it is stored (`cancelled`).

        With a store several processes share (PostgreSQL), a turn this runtime does not run is cancelled
        wherever it runs (a background turn or a `run_turn` call in another replica), and its record is
        returned once that process stored it, or the `running` one after `timeout_s`.

        Raises:
            TurnNotFound: no background turn of this runtime has that id (nor, shared, any stored turn).
            InvalidArgument: the turn has ended already.
        """
        check_ids(turn_id=turn_id)
        handle = self.background_turn(turn_id)
        if handle is None:
            return await self._cancel_elsewhere(turn_id, timeout_s)
        if handle.done:
            raise InvalidArgument(f"turn {turn_id!r} is not running: it ended {handle.record.status}")
        handle.cancel()
        return await handle.wait(timeout_s)

    async def share_task(self, task: SharedTask) -> None:
        """With a store several processes share, make the task (of this runtime's principal) known to all of
        them; else nothing."""
        if self.settings.store_url is not None and (shared := (await self._ready()).shared) is not None:
            await shared.share_task(dataclasses.replace(task, principal=self._principal))

    async def shared_task(self, task_id: str) -> SharedTask | None:
        """A task of the principal's that another process sharing the store created (see `share_task`), or None."""
        check_ids(task_id=task_id)
        if self.settings.store_url is None or (shared := (await self._ready()).shared) is None:
            return None
        task = await shared.shared_task(task_id)
        return task if task is not None and task.principal == self._principal else None

    async def _cancel_elsewhere(self, turn_id: str, timeout_s: float) -> TurnRecord:
        # Answered from memory when no other process can run the turn (the store is not even opened).
        parts = None if self.settings.store_url is None else await self._ready()
        if parts is None or parts.shared is None:
            raise TurnNotFound("(a background turn of this process)", turn_id)
        record = await parts.store.find_turn(turn_id, principal=self._principal)
        if record is None:
            raise TurnNotFound(None, turn_id)
        if record.status != "running":
            raise InvalidArgument(f"turn {turn_id!r} is not running: it ended {record.status}")
        await parts.shared.request_cancel(turn_id)
        return await parts.shared.wait_ended(record.session_id, turn_id, timeout_s)

    def _cancel_here(self, turn_id: str) -> None:
        """A cancel request from a process sharing the store: cancel the turn if it runs here."""
        scope = self._shared.running.get(turn_id)
        if scope is not None:
            scope.cancel()

    def _entered_background(self) -> BackgroundTurns:
        if self._shared.background is None:
            raise RuntimeError("the runtime was not entered: use `async with AgentRuntime(...)`")
        return self._shared.background

    async def _store_unbegun(self, record: TurnRecord) -> None:
        """Store the final record of a background turn that ended before it began (in place of `running`)."""
        try:
            await (await self._ready()).store.finish_turn(record, [])
        except AgentServerError as exc:  # it stays `running`; the next start marks it `interrupted`
            logger.warning("could not store the record of turn %s: %s", record.turn_id, exc.message)

    async def _stored_turn(self, session_id: str, turn_id: str) -> TurnRecord | None:
        try:
            return await (await self._ready()).store.get_turn(session_id, turn_id)
        except AgentServerError:
            return None

    async def compact(
        self,
        session_id: str,
        *,
        keep_last: int | None = None,
        instructions: str | None = None,
        dry_run: bool = False,
        on_event: EventSink | None = None,
        on_wait: WaitCallback | None = None,
        trace_id: str | None = None,
        client_model: ClientModel | None = None,
    ) -> CompactionRecord:
        """Summarise the session's older history, keeping the last `keep_last` messages (default: the settings').

        Raises:
            SessionNotFound: the session is unknown.
        """
        from agent_server.agent.context import DISCARD
        from agent_server.agent.preflight import compact_session

        parts = await self._owned(session_id)
        ids: EventIds = {
            "turn_id": new_id("compact"),
            "session_id": session_id,
            "trace_id": trace_id or new_id("trace"),
        }
        async with hold_session(
            parts, session_id, on_busy=functools.partial(on_wait or ignore_wait, "a turn of this session to finish")
        ):
            return await compact_session(
                self._deps(parts, client_model),
                session_id,
                keep_last=self.settings.compact_keep_last if keep_last is None else keep_last,
                instructions=instructions,
                reason="manual",
                dry_run=dry_run,
                emit=on_event or DISCARD,
                ids=ids,
            )

    async def record_command(self, session_id: str, *, command: str, prompt: str, reply: str) -> TurnRecord:
        """Store a turn that a front door answered itself, without the model (an editor's slash command): a
        `completed` record with `command`, the `prompt` and the `reply` (`final_text`), and no history messages,
        so the model never reads it. It is listed with the session's turns, and replayed in its place.

        Raises:
            SessionNotFound: the session is unknown.
        """
        parts = await self._owned(session_id)
        now = utc_now()
        record = TurnRecord(
            turn_id=new_id("turn"),
            session_id=session_id,
            trace_id=new_id("trace"),
            status="completed",
            prompt=prompt,
            final_text=reply,
            command=command,
            started_at=now,
            finished_at=now,
        )
        async with hold_session(parts, session_id):  # a shared store writes a session's turns under its lock
            if not await parts.store.finish_turn(record, []):
                raise SessionNotFound(session_id)
        return record

    def _deps(
        self,
        parts: Parts,
        client_model: ClientModel | None,
        tools: Toolset | None = None,
        agent: AgentDefinition | None = None,
    ) -> AgentDeps:
        from agent_server.agent.context import AgentDeps

        has_own, agent_llm = (False, None) if agent is None else self._agents.model(agent)
        llm = agent_llm if agent_llm is not None else self._model_for(client_model, configured=not has_own)
        own = self._session_tools
        settings = self.settings if own is None else own.settings
        guide = parts.guide if own is None else own.guide
        tracing = self._shared.tracing
        if tracing is not None:
            llm = tracing.wrap_llm(llm)
        return AgentDeps(
            settings=settings,
            store=parts.store,
            llm=llm,
            tools=tools or parts.registry,
            telemetry=self._telemetry,
            project=guide,
            progress=self._shared.progress,
        )

    @property
    def _telemetry(self) -> Telemetry:
        tracing = self._shared.tracing
        return NO_TELEMETRY if tracing is None else tracing.telemetry

    @property
    def workspace(self) -> Path:
        """Where this runtime's built-in tools work: the settings' workspace (resolved when the settings were
        made), or the one of `in_workspace`."""
        own = self._session_tools
        return self.settings.workspace if own is None else own.workspace

    @asynccontextmanager
    async def in_workspace(self, workspace: Path, mounts: Sequence[MountConfig] = ()) -> AsyncGenerator[AgentRuntime]:
        """This runtime with a session's own tools while the block runs (what the ACP door gives each editor
        session): its turns (`run_turn`, `start_turn`), `compact` and `agent_tools` use the built-in tools
        confined to `workspace` (and its prompt files), the configured mounts, and `mounts`, started now (in the
        background, as at launch) and stopped when the block ends. Everything else is this runtime's, as with
        `as_principal`. Enter and leave it in one task (it owns the mounts' task group); a turn it starts must end
        within the block.

        Raises:
            InvalidArgument: `workspace` is not an absolute path to a directory.
            ConfigError: two of `mounts` share a name.
        """
        from agent_server.tools.registry import ToolRegistry

        root = await anyio.to_thread.run_sync(workspace_root, workspace)
        parts = await self._ready()
        settings = self.settings.model_copy(update={"workspace": root, "state_dir": self.settings.state_path})
        async with AsyncExitStack() as stack:
            own: MountManager | None = None
            if mounts:
                from agent_server.mounts.toolset import MountManager

                manager = MountManager(
                    mounts, environ=self._environ, result_max_bytes=self.settings.mount_result_max_bytes
                )
                own = await stack.enter_async_context(manager)
            toolsets: list[Toolset] = [workspace_tools(self.settings, root, self._environ, parts.sandbox)]
            toolsets += [m for m in (parts.mounts, own) if m is not None]
            view = copy.copy(self)
            view._session_tools = SessionTools(
                workspace=root,
                registry=ToolRegistry(toolsets),
                mounts=own,
                settings=settings,
                guide=project_guide(settings),
            )
            yield view

    def _model_for(self, client: ClientModel | None, *, configured: bool = True) -> LLMClient:
        """The configured model (unless not `configured`: an agent's model is `sampling`), else the caller's own,
        else a stand-in that says how to configure one."""
        if self._llm is not None and configured:
            return self._llm
        from agent_server.llm.sampling import SamplingLLM
        from agent_server.llm.unavailable import UnavailableLLM

        if client is not None and client.requester is not None:
            return SamplingLLM(client.requester, with_tools=client.with_tools, max_tokens=SAMPLING_MAX_TOKENS)
        return UnavailableLLM(client.unavailable) if client and client.unavailable else UnavailableLLM()

    # --- sessions -------------------------------------------------------------------------

    async def create_session(
        self,
        *,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
        connection: str | None = DEFAULT_CONNECTION,
    ) -> SessionInfo:
        """A new session of the principal's; it becomes `connection`'s current session (when given)."""
        parts = await self._ready()
        session = await self._new_session(parts, title or UNTITLED, metadata or {})
        return make_current(parts, self._key(connection), session)

    async def list_sessions(
        self, *, cursor: str | None = None, limit: int = 50, connection: str | None = DEFAULT_CONNECTION
    ) -> tuple[list[SessionInfo], str | None]:
        """The principal's sessions, newest first; `active` marks `connection`'s current one."""
        parts = await self._ready()
        sessions, next_cursor = await parts.store.list_sessions(cursor=cursor, limit=limit, principal=self._principal)
        return [marked(parts, self._key(connection), s) for s in sessions], next_cursor

    async def get_session(self, session_id: str, *, connection: str | None = DEFAULT_CONNECTION) -> SessionInfo:
        parts = await self._owned(session_id)
        return marked(parts, self._key(connection), await parts.store.get_session(session_id))

    async def switch_session(self, session_id: str, *, connection: str | None = DEFAULT_CONNECTION) -> SessionInfo:
        """Make `session_id` the connection's current session."""
        parts = await self._owned(session_id)
        return make_current(parts, self._key(connection), await parts.store.get_session(session_id))

    async def fork_session(
        self, session_id: str, *, at_turn: str | None = None, title: str | None = None
    ) -> SessionInfo:
        check_ids(at_turn=at_turn)
        """A copy of the session up to `at_turn` (see `store.base`); it belongs to the same principal."""
        parts = await self._owned(session_id)
        fork = await parts.store.fork_session(session_id, at_turn=at_turn, title=title)
        parts.owners.remember(fork.session_id, self._principal)
        return fork

    async def delete_session(self, session_id: str) -> None:
        parts = await self._owned(session_id)
        await parts.store.delete_session(session_id)
        parts.current.forget(session_id)
        parts.owners.forget(session_id)

    async def session_or_current(self, session_id: str | None, *, connection: str | None = DEFAULT_CONNECTION) -> str:
        """`session_id` (checked to exist), else the connection's current session.

        Raises:
            SessionNotFound: `session_id` is unknown.
            InvalidArgument: no `session_id` and the connection has no current session.
        """
        check_ids(session_id=session_id)
        parts = await self._ready()
        if session_id is not None:
            await self._owned(session_id)
            return session_id
        current = parts.current.get(self._key(connection))
        if current is None or not await session_exists(parts.store, current):
            raise InvalidArgument(NO_CURRENT)
        return current

    async def list_turns(
        self, session_id: str, *, cursor: str | None = None, limit: int = 20
    ) -> tuple[list[TurnRecord], str | None]:
        """One page of the session's turns; a background turn of this runtime's as it is now (its live
        status, e.g. `awaiting_input`), the others as stored."""
        store = (await self._owned(session_id)).store
        turns, next_cursor = await store.list_turns(session_id, cursor=cursor, limit=limit)
        return [self._live(turn) for turn in turns], next_cursor

    def _live(self, stored: TurnRecord) -> TurnRecord:
        """A running background turn's record as stored (with its progress so far), with its live status; an
        ended one as stored (see `_unless_ended_in_store`)."""
        if stored.status != "running":
            return stored
        handle = self._shared.background.get(stored.turn_id) if self._shared.background is not None else None
        if handle is not None and not handle.done:
            return handle.record
        return self._live_record(stored.turn_id) or stored

    def _live_record(self, turn_id: str) -> TurnRecord | None:
        """The record so far of a turn of the principal's running in this process (not yet stored)."""
        principal, record = self._shared.live.get(turn_id, (None, None))
        return record if principal == self._principal else None

    async def get_turn(self, session_id: str, turn_id: str) -> TurnRecord:
        check_ids(turn_id=turn_id)
        return await (await self._owned(session_id)).store.get_turn(session_id, turn_id)

    async def list_messages(
        self, session_id: str, *, cursor: str | None = None, limit: int = 50
    ) -> tuple[list[tuple[StoredMessage, bool]], str | None]:
        """One page of the session's stored messages, archived ones included (with their flag)."""
        return await (await self._owned(session_id)).store.list_messages(session_id, cursor=cursor, limit=limit)

    async def list_compactions(self, session_id: str) -> list[CompactionRecord]:
        return await (await self._owned(session_id)).store.list_compactions(session_id)

    async def summary(self, session_id: str) -> str | None:
        """The session's latest compaction summary."""
        return (await (await self._owned(session_id)).store.load_history(session_id)).summary

    async def history(self, session_id: str) -> SessionHistory:
        """The session's live context: its latest compaction summary and the messages after it."""
        return await (await self._owned(session_id)).store.load_history(session_id)

    async def agent_tools(self) -> ToolsReport:
        parts = await self._ready()
        session_tools = self._session_tools
        registry = parts.registry if session_tools is None else session_tools.registry
        tools = await registry.list_tools()
        servers = [state for manager in all_mounts(parts, session_tools) for state in manager.states()]
        sandbox = None if parts.sandbox is None else await parts.sandbox.state()
        guide = parts.guide if session_tools is None else session_tools.guide
        guidance = await guide.guidance()
        return ToolsReport(tools=tools, servers=servers, dropped=registry.dropped(), sandbox=sandbox, guidance=guidance)

    async def _session_for_turn(
        self, parts: Parts, session_id: str | None, connection: str | None, prompt: str, agent: AgentDefinition | None
    ) -> str:
        """The turn's session; one it creates remembers `agent` (in its metadata)."""
        store = parts.store
        title = title_from(prompt)
        metadata: dict[str, Any] = {} if agent is None else {AGENT_KEY: agent.name}

        async def create() -> str:
            return (await self._new_session(parts, title, metadata)).session_id

        if session_id == NEW_SESSION:
            return await create()
        if session_id is not None:
            # Whose it is, from memory for a session seen before; that it still exists is checked by the turn's
            # start (`begin_turn` raises SessionNotFound): no extra hop.
            await parts.owners.check(store, session_id, self._principal)
            return session_id
        key = self._key(connection)
        if key is None:  # no connection identity: every such call starts fresh
            return await create()
        return await parts.current.get_or_create(key, lambda s: session_exists(store, s), create)

    async def _remembered_agent(self, parts: Parts, session_id: str) -> AgentDefinition | None:
        """The agent the session was created with (none when no agent is defined: no store hop).

        Raises:
            InvalidArgument: that agent is no longer defined.
        """
        if not (await self._agents.catalog(self.workspace)).agents:
            return None
        name = (await parts.store.get_session(session_id)).metadata.get(AGENT_KEY)
        if not isinstance(name, str):
            return None
        try:
            return await self._agents.chosen(self.workspace, name)
        except InvalidArgument as exc:
            raise InvalidArgument(f"the session's agent: {exc.message}; pass agent to choose one") from None

    async def agent_catalog(self) -> Catalog:
        """The named agents of this runtime's workspace (the settings' and its definition files'), read again when
        a file changed; its `version` grows with each change of the set."""
        return await self._agents.catalog(self.workspace)

    async def _new_session(self, parts: Parts, title: str, metadata: dict[str, Any]) -> SessionInfo:
        session = await parts.store.create_session(title=title, metadata=metadata, principal=self._principal)
        parts.owners.remember(session.session_id, self._principal)
        return session

    async def _owned(self, session_id: str) -> Parts:
        """The parts, once `session_id` is known to be the principal's.

        Raises:
            SessionNotFound: the session is unknown, or another principal's.
            InvalidArgument: `session_id` is no id.
        """
        check_ids(session_id=session_id)
        parts = await self._ready()
        await parts.owners.check(parts.store, session_id, self._principal)
        return parts

    def _key(self, connection: str | None) -> CurrentKey | None:
        """Whose current session a connection's is: connections of two principals never share one."""
        return None if connection is None else (self._principal, connection)

    @asynccontextmanager
    async def _hold_queued(
        self, parts: Parts, session_id: str, deadline: float, *, counted: bool, on_busy: Callable[[], None]
    ) -> AsyncGenerator[bool]:
        """`hold_session`; while `counted` and the session is busy, the wait counts as one of the principal's
        queued turns (`limits.queued_turns`; background turns are bounded by theirs instead).

        Raises:
            InvalidArgument: the principal has `limits.queued_turns` turns waiting already.
        """
        async with AsyncExitStack() as stack:
            waiting = counted and parts.locks.busy(session_id)
            with parts.queued.one(self._principal) if waiting else contextlib.nullcontext():
                held = await stack.enter_async_context(hold_session(parts, session_id, deadline, on_busy))
            yield held
