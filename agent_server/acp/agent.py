"""`AcpAgent`: the ACP `Agent` the library routes requests to, over one `AgentRuntime`.

Each session this connection opened (`session/new`, `load`, `resume`, `fork`) is an `OpenSession`:
its workspace (the request's `cwd`) and the MCP servers the client gave, held by a task in the
server's task group (`runtime.in_workspace`), stopped by `session/close` or when the process exits.
A prompt needs its session open here (ACP: load or resume it first). Sessions are the runtime's
stored sessions, the same ones the MCP front door serves; a session's `cwd` is kept in its metadata
(`workspace`) for `session/list`; sessions made over MCP report the configured workspace.

The library runs every request in its own task; `session/cancel` cancels the cancel scopes of the
session's running prompts, so the turn is recorded `cancelled` and the prompt answers `cancelled`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.abc
from acp import PROTOCOL_VERSION, Client, RequestError
from acp.schema import (
    AgentCapabilities,
    ClientCapabilities,
    CloseSessionResponse,
    ForkSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionForkCapabilities,
    SessionListCapabilities,
    SessionResumeCapabilities,
    StopReason,
)
from acp.schema import SessionInfo as AcpSessionInfo

from agent_server.acp.commands import AVAILABLE, CommandContext, parse_command
from agent_server.acp.errors import INVALID_PARAMS, turn_error, wire_errors
from agent_server.acp.mcp_servers import ClientMcpServer, mount_configs
from agent_server.acp.permissions import AcpApprovalChannel
from agent_server.acp.prompt_blocks import PromptBlock, prompt_text
from agent_server.acp.updates import Update, commands_update, prompt_usage, replay, turn_updates, update_for
from agent_server.doors.records import turn_json
from agent_server.doors.show import Said
from agent_server.doors.transcript import load_transcript
from agent_server.errors import InvalidArgument
from agent_server.mounts.config import MountConfig
from agent_server.runtime import AgentRuntime
from agent_server.trace_context import TraceContext
from agent_server.turn_options import TurnChoices, TurnOptions
from agent_server.types import SessionInfo, TurnRecord
from agent_server.version import NAME, version

logger = logging.getLogger(__name__)

META_KEY = "agent_server"
"""The `_meta` key of what this agent adds: a prompt's `options`, an answer's `turn`."""
WORKSPACE_KEY = "workspace"
"""The session metadata key that keeps an ACP session's `cwd`."""
LIST_PAGE = 50
STOP_REASONS: dict[str, StopReason] = {
    "completed": "end_turn",
    "truncated": "max_tokens",
    "halted": "max_turn_requests",
    "cancelled": "cancelled",
}
"""How a turn that is no error ends a prompt; any other status (failed, timed out) is a JSON-RPC error."""


@dataclass
class OpenSession:
    session_id: str
    runtime: AgentRuntime
    """The runtime in this session's workspace, with its MCP servers (`AgentRuntime.in_workspace`)."""
    closed: anyio.Event
    approvals: AcpApprovalChannel
    turns: set[anyio.CancelScope] = field(default_factory=set[anyio.CancelScope])

    def close(self) -> None:
        for scope in self.turns:
            scope.cancel()
        self.closed.set()


class AcpAgent:
    """See the module docstring. `tg` is the task group that holds the sessions' tools (and lives as long
    as the connection)."""

    def __init__(self, runtime: AgentRuntime, tg: anyio.abc.TaskGroup) -> None:
        self._runtime = runtime
        self._tg = tg
        self._open: dict[str, OpenSession] = {}
        self._client: Client | None = None

    def on_connect(self, conn: Client) -> None:
        self._client = conn

    @property
    def client(self) -> Client:
        assert self._client is not None, "the library connects the client before routing requests"
        return self._client

    # --- handshake ----------------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        capabilities = AgentCapabilities(
            load_session=True,
            prompt_capabilities=PromptCapabilities(embedded_context=True),
            mcp_capabilities=McpCapabilities(http=True),
            session_capabilities=SessionCapabilities(
                list=SessionListCapabilities(),
                resume=SessionResumeCapabilities(),
                close=SessionCloseCapabilities(),
                fork=SessionForkCapabilities(),
            ),
        )
        info = Implementation(name=NAME, title=NAME, version=version())
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION), agent_capabilities=capabilities, agent_info=info
        )

    # --- sessions -----------------------------------------------------------------------------

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[ClientMcpServer] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        with wire_errors("session/new"):
            workspace, configs = _workspace_and_mounts(cwd, mcp_servers)
            runtime, closed = await self._tg.start(self._hold_tools, workspace, configs)
            try:
                info = await self._runtime.create_session(
                    metadata={WORKSPACE_KEY: str(runtime.workspace)}, connection=None
                )
            except BaseException:
                closed.set()
                raise
            self._register(info.session_id, runtime, closed)
            return NewSessionResponse(session_id=info.session_id)

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[ClientMcpServer] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        with wire_errors("session/load"):
            await self._reopen(session_id, cwd, mcp_servers)
            for update in replay(await load_transcript(self._opened(session_id).runtime, session_id)):
                await self._send(session_id, update)
            return LoadSessionResponse()

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[ClientMcpServer] | None = None,
        **kwargs: Any,
    ) -> ResumeSessionResponse:
        with wire_errors("session/resume"):
            await self._reopen(session_id, cwd, mcp_servers)
            return ResumeSessionResponse()

    async def fork_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[ClientMcpServer] | None = None,
        **kwargs: Any,
    ) -> ForkSessionResponse:
        with wire_errors("session/fork"):
            fork = await self._runtime.fork_session(session_id)
            await self._reopen(fork.session_id, cwd, mcp_servers)
            return ForkSessionResponse(session_id=fork.session_id)

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        with wire_errors("session/list"):
            sessions, next_cursor = await self._runtime.list_sessions(cursor=cursor, limit=LIST_PAGE, connection=None)
            listed = [self._listed(s) for s in sessions]
            if cwd is not None:
                listed = [s for s in listed if s.cwd == cwd]
            return ListSessionsResponse(sessions=listed, next_cursor=next_cursor)

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        with wire_errors("session/close"):
            session = self._open.pop(session_id, None)
            if session is None:
                await self._runtime.get_session(session_id, connection=None)  # unknown: not found
            else:
                session.close()
            return CloseSessionResponse()

    async def _reopen(self, session_id: str, cwd: str, mcp_servers: list[ClientMcpServer] | None) -> None:
        """Open a stored session here with this workspace and these servers (closing it first if open)."""
        await self._runtime.get_session(session_id, connection=None)
        workspace, configs = _workspace_and_mounts(cwd, mcp_servers)
        runtime, closed = await self._tg.start(self._hold_tools, workspace, configs)
        previous = self._open.pop(session_id, None)
        if previous is not None:
            previous.close()
        self._register(session_id, runtime, closed)

    def _register(self, session_id: str, runtime: AgentRuntime, closed: anyio.Event) -> None:
        approvals = AcpApprovalChannel(self.client, session_id)
        self._open[session_id] = OpenSession(session_id, runtime, closed, approvals)
        # After the response that names the session: a task of its own, started once this handler returns.
        self._tg.start_soon(self._announce_commands, session_id)

    async def _announce_commands(self, session_id: str) -> None:
        try:
            await self._send(session_id, commands_update(AVAILABLE))
        except Exception as exc:  # the connection closed meanwhile: nobody to tell
            logger.info("available commands of %s not sent: %s", session_id, exc)

    async def _hold_tools(
        self,
        workspace: Path,
        configs: list[MountConfig],
        *,
        task_status: anyio.abc.TaskStatus[tuple[AgentRuntime, anyio.Event]],
    ) -> None:
        """Own one session's tools (its mounts' task group) until the session closes or the server stops."""
        async with self._runtime.in_workspace(workspace, configs) as runtime:
            closed = anyio.Event()
            task_status.started((runtime, closed))
            await closed.wait()

    def _listed(self, session: SessionInfo) -> AcpSessionInfo:
        cwd = session.metadata.get(WORKSPACE_KEY)
        workspace = cwd if isinstance(cwd, str) else str(self._runtime.settings.workspace.resolve())
        return AcpSessionInfo(
            session_id=session.session_id, cwd=workspace, title=session.title, updated_at=session.updated_at
        )

    # --- prompts ------------------------------------------------------------------------------

    async def prompt(self, prompt: list[PromptBlock], session_id: str, **kwargs: Any) -> PromptResponse:
        """A prompt's `_meta.agent_server.options` holds the turn's choices (`TurnChoices`: the tool-pass limit,
        the timeout, the trace mode, the model, the tool allow-list), checked as MCP checks `run_turn`'s."""
        with wire_errors("session/prompt"):
            session = self._opened(session_id)
            choices = _choices(kwargs.get(META_KEY))
            text = prompt_text(prompt)
            command = parse_command(text)
            if command is not None:
                reply = await command.handler(CommandContext(session.runtime, session_id), command.args)
                await self._send(session_id, update_for(Said("agent", reply)))
                await self._runtime.record_command(session_id, command=command.name, prompt=text, reply=reply)
                return PromptResponse(stop_reason="end_turn")
            trace_context = TraceContext.from_meta(kwargs)  # `_meta` arrives as kwargs
            options = TurnOptions.of(choices, approvals=session.approvals, trace_context=trace_context)
            return await self._turn(session, text, options)

    async def _turn(self, session: OpenSession, text: str, options: TurnOptions) -> PromptResponse:
        settings = self._runtime.settings
        updates = turn_updates(
            lambda update: self._send(session.session_id, update),
            flush_interval=settings.token_flush_interval_s,
            context_window=settings.context_window,
        )
        record: TurnRecord | None = None
        with anyio.CancelScope() as scope:
            session.turns.add(scope)
            try:
                record = await session.runtime.run_turn(
                    text, session_id=session.session_id, connection=None, on_event=updates, options=options
                )
            finally:
                session.turns.discard(scope)
        if record is None and updates.turn_id is not None:  # cancelled: its record was written before it stopped
            record = await self._runtime.get_turn(session.session_id, updates.turn_id)
        await updates.end("cancelled" if record is None else record.status)
        if record is None:  # cancelled before the turn began
            return PromptResponse(stop_reason="cancelled")
        return _response(record)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self._open.get(session_id)
        if session is not None:
            for scope in session.turns:
                scope.cancel()

    def _opened(self, session_id: str) -> OpenSession:
        session = self._open.get(session_id)
        if session is None:
            raise RequestError(
                INVALID_PARAMS,
                f"session {session_id!r} is not open on this connection: session/new, session/load or "
                "session/resume it first",
            )
        return session

    async def _send(self, session_id: str, update: Update) -> None:
        await self.client.session_update(session_id=session_id, update=update)

    def close_all(self) -> None:
        """Close every open session (the connection ended)."""
        for session in self._open.values():
            session.close()
        self._open.clear()


def _response(record: TurnRecord) -> PromptResponse:
    stop = STOP_REASONS.get(record.status)
    if stop is None:
        raise turn_error(record)
    return PromptResponse(
        stop_reason=stop,
        usage=prompt_usage(record.usage),
        field_meta={META_KEY: {"turn": turn_json(record)}},
    )


def _choices(meta: object) -> TurnChoices:
    """The turn's choices from a prompt's `_meta.agent_server` (none: the defaults).

    Raises:
        ValidationError: `options` holds an unknown or invalid choice.
        InvalidArgument: `_meta.agent_server` or its `options` is no object.
    """
    if meta is None:
        return TurnChoices()
    options: object = cast(dict[str, object], meta).get("options", {}) if isinstance(meta, dict) else None
    if not isinstance(options, dict):
        raise InvalidArgument(f"_meta.{META_KEY}.options must be an object of turn options")
    return TurnChoices.model_validate(options)


def _workspace_and_mounts(cwd: str, servers: list[ClientMcpServer] | None) -> tuple[Path, list[MountConfig]]:
    """The session's workspace (`cwd`, absolute) and its client's servers; checked before anything starts.

    Raises:
        InvalidArgument: `cwd` is not absolute, or a server is not valid (the directory itself is
            checked by `runtime.in_workspace`).
    """
    workspace = Path(cwd)
    if not workspace.is_absolute():
        raise InvalidArgument(f"cwd {cwd!r} is not an absolute path")
    return workspace, mount_configs(servers, workspace)
