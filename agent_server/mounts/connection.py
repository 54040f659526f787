"""One mounted MCP server: a connection owned by one task, with its state, tools, calls and restarts.

Each start of the server is a *generation* whose whole life (transport, `mcp.Client`, handshake,
`tools/list`, list-changed refreshes, teardown) runs in one owner task, in the task group the
`MountManager` lends. A transport failure (stdio EOF, an HTTP `ExceptionGroup`) therefore ends that
task only, never a caller or another server (the SDK guide, section 6.6, on why not
`ClientSessionGroup`). Calls come from other tasks and use the generation's `Client` concurrently.

States: `starting` (handshake and first `tools/list`, bounded by `startup_timeout_s`), `ready`,
`failed` (it crashed or could not start; `error` says why), `stopped` (shut down, or disabled).
When a generation dies its in-flight calls are cancelled at once and fail with an error. The next
call starts a new generation after a backoff (0.25 s doubling to 30 s, from the failure; reset by a
successful call), waited out within the call's own timeout; a call makes at most one restart attempt.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client, MCPError
from mcp.client.session import IncomingMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from agent_server.approvals import current_forwarder
from agent_server.errors import ToolFailure
from agent_server.mounts.config import MountConfig
from agent_server.mounts.elicitation import ElicitationRelay
from agent_server.mounts.failures import describe_failure
from agent_server.mounts.progress import ProgressRelay
from agent_server.mounts.stdio import StdioProcess
from agent_server.mounts.transport import InProcessServer, list_all_tools, open_client
from agent_server.redaction import redact, redact_logger
from agent_server.tools.base import ProgressCallback
from agent_server.trace_context import outgoing

logger = logging.getLogger(__name__)

URL_LOGGERS = ("httpx2", "mcp.client.streamable_http")
"""Loggers that log a mounted HTTP server's URL: their records are redacted with its secrets."""

State = Literal["starting", "ready", "failed", "stopped"]
_BACKOFF_FIRST_S = 0.25
_BACKOFF_MAX_S = 30.0
_TIMEOUT_MARGIN_S = 0.5
_EXIT_STATUS_WAIT_S = 0.25


@dataclass(eq=False)
class _Generation:
    """One start of the server, from spawn to teardown."""

    number: int
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    """The owner task's whole life; cancelled by `stop()` while starting."""
    startup: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    """The connection and first listing; cancelled by the startup watchdog."""
    settled: anyio.Event = field(default_factory=anyio.Event)
    """Set when startup ended: ready or failed."""
    finished: anyio.Event = field(default_factory=anyio.Event)
    wake: anyio.Event = field(default_factory=anyio.Event)
    client: Client | None = None
    stdio: StdioProcess | None = None
    inflight: set[anyio.CancelScope] = field(default_factory=set[anyio.CancelScope])
    stop_requested: bool = False
    refresh_requested: bool = False
    over: bool = False
    """Failed or stopped: no new calls, no more state changes from this generation."""

    def signal(self, *, stop: bool = False, refresh: bool = False) -> None:
        self.stop_requested |= stop
        self.refresh_requested |= refresh
        self.wake.set()


class MountConnection:
    """One mounted server (see the module docstring). Created and driven by `MountManager`."""

    def __init__(
        self,
        config: MountConfig,
        *,
        environ: Mapping[str, str],
        mode: str = "auto",
        in_process: InProcessServer | None = None,
        progress_interval_s: float = 0.1,
        stop_grace_s: float = 1.0,
    ) -> None:
        self.config = config
        self._environ = environ
        self._mode = mode
        self._in_process = in_process
        self._progress_interval_s = progress_interval_s
        self._stop_grace_s = stop_grace_s
        self.state: State = "stopped"
        self.error: str | None = None if config.enabled else "disabled in the configuration"
        self.tools: list[types.Tool] = []
        """The server's tools as last listed; kept after a crash so that a call can restart it."""
        self._tools_updated: anyio.Event | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._gen: _Generation | None = None  # (anyio objects need the event loop: none is created here)
        self._failures = 0
        self._restart_at = 0.0
        self._closing = False
        self._elicitations = ElicitationRelay(config.name)
        if config.transport == "http":
            for name in URL_LOGGERS:
                redact_logger(name, config.secrets)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def pid(self) -> int | None:
        """The current stdio server process's id (also its process group's), once spawned."""
        stdio = self._gen.stdio if self._gen is not None else None
        return stdio.pid if stdio is not None else None

    @property
    def tools_updated(self) -> anyio.Event:
        """Set (and replaced) whenever `tools` is listed anew: at startup and after a list-changed notification."""
        if self._tools_updated is None:
            self._tools_updated = anyio.Event()
        return self._tools_updated

    def start(self, task_group: anyio.abc.TaskGroup) -> None:
        """Start the first generation in the background (owner tasks live in `task_group`)."""
        self._tg = task_group
        if self.config.enabled:
            self._spawn()

    def stop(self) -> None:
        """Ask the current generation to end; a server still starting is cancelled outright."""
        self._closing = True
        gen = self._gen
        if gen is None:
            self.state = "stopped"
        elif gen.over and gen.finished.is_set():
            self._set_stopped(gen)
        elif self.state == "starting":
            gen.scope.cancel()
        else:
            gen.signal(stop=True)

    async def wait_finished(self) -> None:
        if self._gen is not None:
            await self._gen.finished.wait()

    async def wait_settled(self) -> None:
        """Wait (at most `startup_timeout_s`) for a server that is starting to be ready or failed."""
        if self._gen is not None:
            with anyio.move_on_after(self.config.startup_timeout_s):
                await self._gen.settled.wait()

    # --- calls ------------------------------------------------------------------------------

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], *, on_progress: ProgressCallback | None = None
    ) -> types.CallToolResult:
        """Call the server's `tool`, restarting the server first if it crashed.

        Raises:
            ToolFailure: the server is down and could not be restarted in time, the call timed out,
                the server died during it, or it answered with a protocol error.
        """
        timeout = self.config.timeout_s
        deadline = anyio.current_time() + timeout
        gen: _Generation | None = None
        with anyio.move_on_after(timeout):
            gen = await self._ready_generation(deadline)
        if gen is None:
            raise ToolFailure(
                f"MCP server {self.name!r} did not become ready within the call's timeout ({timeout:g} s)"
                + (f": {self.error}" if self.error else "")
            )
        return await self._call_on(gen, tool, arguments, deadline, on_progress)

    async def _ready_generation(self, deadline: float) -> _Generation:
        restarted = False
        while True:
            gen = self._gen
            if gen is None or self._closing or self.state == "stopped":
                raise ToolFailure(f"MCP server {self.name!r} is stopped ({self.error or 'not running'})")
            if self.state == "ready":
                return gen
            if self.state == "starting":
                await gen.settled.wait()
                continue
            if restarted:
                raise ToolFailure(f"MCP server {self.name!r} failed to restart: {self.error}")
            wait = self._restart_at - anyio.current_time()
            if wait > deadline - anyio.current_time():
                raise ToolFailure(
                    f"MCP server {self.name!r} is down ({self.error}); next restart attempt in {wait:.1f} s"
                )
            if wait > 0:
                await anyio.sleep(wait)  # the backoff, within this call's timeout
            if self.state == "failed" and self._gen is gen:
                logger.info("restarting MCP server %r after: %s", self.name, self.error)
                self._spawn()
            restarted = True

    async def _call_on(
        self,
        gen: _Generation,
        tool: str,
        arguments: dict[str, Any],
        deadline: float,
        on_progress: ProgressCallback | None,
    ) -> types.CallToolResult:
        client = gen.client
        assert client is not None
        relay = ProgressRelay(on_progress, self._progress_interval_s) if on_progress else None
        # Cancelled by _fail when the server dies; its deadline backs up the SDK's read timeout.
        scope = anyio.CancelScope(deadline=deadline + _TIMEOUT_MARGIN_S)
        gen.inflight.add(scope)
        try:
            with self._elicitations.calling(current_forwarder()):
                outcome = await self._call_relayed(client, tool, arguments, deadline, scope, relay)
        finally:
            gen.inflight.discard(scope)
        if relay is not None:
            await relay.flush()
        return await self._call_outcome(gen, tool, outcome)

    async def _call_relayed(
        self,
        client: Client,
        tool: str,
        arguments: dict[str, Any],
        deadline: float,
        scope: anyio.CancelScope,
        relay: ProgressRelay | None,
    ) -> types.CallToolResult | Exception | None:
        """The call with its progress relayed; its outcome (None when `scope` was cancelled)."""
        outcome: types.CallToolResult | Exception | None = None
        async with anyio.create_task_group() as tg:
            if relay is not None:
                tg.start_soon(relay.run)
            with scope:
                try:
                    outcome = await client.call_tool(
                        tool,
                        arguments,
                        read_timeout_seconds=max(deadline - anyio.current_time(), 0.001),
                        progress_callback=relay.push if relay is not None else None,
                        meta=_trace_meta(),
                    )
                except Exception as exc:
                    outcome = exc
            tg.cancel_scope.cancel()
        return outcome

    async def _call_outcome(
        self, gen: _Generation, tool: str, outcome: types.CallToolResult | Exception | None
    ) -> types.CallToolResult:
        if isinstance(outcome, types.CallToolResult):
            self._failures = 0
            return outcome
        if outcome is None and gen.over:  # cancelled by _fail (or _set_stopped)
            raise ToolFailure(f"MCP server {self.name!r} stopped during the call: {self.error or 'shut down'}")
        if isinstance(outcome, MCPError) and outcome.code == types.CONNECTION_CLOSED:
            await self._died(gen, outcome)
            raise ToolFailure(f"MCP server {self.name!r} stopped during the call: {self.error}")
        if outcome is None or (isinstance(outcome, MCPError) and outcome.code == types.REQUEST_TIMEOUT):
            raise ToolFailure(
                f"{tool!r} on MCP server {self.name!r} timed out (the call's timeout is {self.config.timeout_s:g} s)"
            )
        if isinstance(outcome, MCPError):
            raise ToolFailure(
                self._redact(f"MCP server {self.name!r} answered {tool!r} with error {outcome.code}: {outcome}")
            )
        raise ToolFailure(
            self._redact(f"calling {tool!r} on MCP server {self.name!r} failed: {type(outcome).__name__}: {outcome}")
        )

    def _redact(self, text: str) -> str:
        return redact(text, self.config.secrets)

    # --- the owner task ---------------------------------------------------------------------

    def _spawn(self) -> None:
        assert self._tg is not None, "start() first"
        gen = _Generation(self._gen.number + 1 if self._gen is not None else 1)
        self._gen = gen
        self.state = "starting"
        self._tg.start_soon(self._own, gen, name=f"mcp mount {self.name!r} #{gen.number}")

    async def _own(self, gen: _Generation) -> None:
        failure: BaseException | None = None
        try:
            with gen.scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._startup_watchdog, gen)
                    await self._run(gen)
                    tg.cancel_scope.cancel()
        except Exception as exc:  # ExceptionGroup from a transport included
            failure = exc
        finally:
            self._end(gen, failure)
            gen.finished.set()

    async def _startup_watchdog(self, gen: _Generation) -> None:
        """Fail a startup that takes too long at once; its teardown (stopping the process) may take longer."""
        with anyio.move_on_after(self.config.startup_timeout_s):
            await gen.settled.wait()
        if not gen.settled.is_set():
            why = f"startup timed out after {self.config.startup_timeout_s:g} s (handshake and tools/list unanswered)"
            self._fail(gen, describe_failure(TimeoutError(why), self.config, gen.stdio))
            gen.startup.cancel()

    async def _run(self, gen: _Generation) -> None:
        with gen.startup:
            async with self._open(gen) as client:
                tools = await list_all_tools(client)
                self._set_ready(gen, client, tools)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._listen, client, gen)
                    if gen.stdio is not None:
                        tg.start_soon(self._watch_exit, gen, gen.stdio)
                    await self._serve(client, gen)
                    tg.cancel_scope.cancel()

    def _open(self, gen: _Generation) -> AbstractAsyncContextManager[Client]:
        async def on_message(message: IncomingMessage) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                gen.signal(refresh=True)

        def on_spawn(process: StdioProcess) -> None:
            gen.stdio = process

        return open_client(
            self.config,
            environ=self._environ,
            mode=self._mode,
            in_process=self._in_process,
            stop_grace_s=self._stop_grace_s,
            on_message=on_message,
            on_spawn=on_spawn,
            on_elicit=self._elicitations.handle,
        )

    async def _serve(self, client: Client, gen: _Generation) -> None:
        """Until asked to stop: refresh the tools whenever the server says they changed."""
        while True:
            await gen.wake.wait()
            gen.wake = anyio.Event()
            if gen.stop_requested:
                return
            if gen.refresh_requested:
                gen.refresh_requested = False
                try:
                    with anyio.fail_after(self.config.startup_timeout_s):
                        tools = await list_all_tools(client, refresh=True)
                except (Exception, TimeoutError) as exc:
                    logger.warning("MCP server %r: refreshing its tools failed: %s", self.name, self._redact(repr(exc)))
                else:
                    self._set_tools(tools)

    async def _listen(self, client: Client, gen: _Generation) -> None:
        """On 2026-07-28 connections list-changed notifications come only over `subscriptions/listen`."""
        caps = client.server_capabilities.tools
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS or caps is None or not caps.list_changed:
            return
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    gen.signal(refresh=True)
        except Exception as exc:
            logger.debug("MCP server %r: no tools list-changed subscription: %s", self.name, self._redact(repr(exc)))

    async def _watch_exit(self, gen: _Generation, stdio: StdioProcess) -> None:
        await stdio.closed.wait()
        if not gen.stop_requested:
            await self._died(gen, None)

    async def _died(self, gen: _Generation, exc: BaseException | None) -> None:
        if gen.stdio is not None:
            await gen.stdio.wait_exit(_EXIT_STATUS_WAIT_S)  # for the message; the process is going or gone
        self._fail(gen, describe_failure(exc, self.config, gen.stdio))

    def _set_ready(self, gen: _Generation, client: Client, tools: list[types.Tool]) -> None:
        if gen.over:  # the startup watchdog failed it in the same instant
            return
        gen.client = client
        self.state, self.error = "ready", None
        self._set_tools(tools)
        gen.settled.set()
        logger.info("MCP server %r ready (%s, %d tools)", self.name, client.protocol_version, len(tools))

    def _set_tools(self, tools: list[types.Tool]) -> None:
        self.tools = tools
        if self._tools_updated is not None:
            self._tools_updated.set()
            self._tools_updated = None

    def _fail(self, gen: _Generation, reason: str) -> None:
        """The generation died: fail its calls now, and let the next call restart the server."""
        if gen.over or gen is not self._gen:
            return
        gen.over = True
        self._failures += 1
        backoff = min(_BACKOFF_MAX_S, _BACKOFF_FIRST_S * 2 ** (self._failures - 1))
        self._restart_at = anyio.current_time() + backoff
        self.state, self.error = "failed", reason
        logger.warning("MCP server %r failed: %s", self.name, reason)
        for scope in gen.inflight:
            scope.cancel()
        gen.settled.set()
        gen.signal(stop=True)

    def _end(self, gen: _Generation, failure: BaseException | None) -> None:
        if gen is not self._gen:
            return
        if self._closing:
            self._set_stopped(gen)
        elif not gen.over:
            self._fail(gen, describe_failure(failure, self.config, gen.stdio))

    def _set_stopped(self, gen: _Generation) -> None:
        gen.over = True
        self.state = "stopped"
        for scope in gen.inflight:
            scope.cancel()
        gen.settled.set()


def _trace_meta() -> types.RequestParamsMeta | None:
    """The traced tool call's W3C context for the call's `_meta` (README "Traces"), or None when untraced."""
    context = outgoing()
    return None if context is None else types.RequestParamsMeta(**context.carrier())
