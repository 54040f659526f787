"""`serve_acp`: the ACP agent over stdin/stdout until stdin closes or SIGTERM/SIGINT arrives.

stdout is the wire and carries only ACP JSON-RPC: the door serves behind `doors.stdio` (the wire off fds 0 and
1 while serving, bounded lines in, whole messages out), as the MCP door does. Messages are framed by
`NdjsonWire` (`acp/wire.py`), not by the library's own framing: a line that is no message is answered with a
JSON-RPC error and the connection goes on, and a line longer than `MAX_LINE_BYTES` ends it.

Shutdown, either way: the connection closes (its request tasks are cancelled, so running turns are
recorded `cancelled`), every session's mounted servers stop, and the store closes.
"""

from __future__ import annotations

import logging
import threading
from typing import cast

import anyio
from acp import Agent
from acp.agent.connection import AgentSideConnection

from agent_server.acp.agent import AcpAgent
from agent_server.acp.wire import NdjsonWire
from agent_server.doors.signals import cancel_on_signal
from agent_server.doors.stdio import claim_stdio
from agent_server.runtime import AgentRuntime
from agent_server.settings import Settings

logger = logging.getLogger(__name__)


async def serve_acp(settings: Settings) -> None:
    """Serve ACP over stdio; see the module docstring.

    Raises:
        ConfigError: the settings name a provider or script that cannot be loaded.
    """
    runtime = AgentRuntime(settings)
    serving = anyio.CancelScope()
    unwound = threading.Event()
    try:
        async with runtime, anyio.create_task_group() as tg:
            tg.start_soon(cancel_on_signal, serving, unwound)
            tg.start_soon(_prepare, runtime)
            async with anyio.create_task_group() as sessions:  # each open session's tools (mounts)
                agent = AcpAgent(runtime, sessions)
                with serving:
                    await _listen(agent)
                agent.close_all()  # each session's holder stops its mounts and leaves
            tg.cancel_scope.cancel()
    finally:
        unwound.set()


async def _listen(agent: AcpAgent) -> None:
    with claim_stdio() as (reader, writer):
        # The library routes only the methods the agent has (the others answer "method not found").
        wire = NdjsonWire(reader, writer)
        conn = AgentSideConnection(cast(Agent, agent), wire, listening=False, use_unstable_protocol=True)
        async with writer.batching():  # a turn's updates of one moment are one write
            try:
                await conn.listen()
            finally:
                with anyio.CancelScope(shield=True):
                    await conn.close()


async def _prepare(runtime: AgentRuntime) -> None:
    """Load the turn machinery and open the store while the client shakes hands."""
    try:
        await runtime.prepare()
    except Exception as exc:  # the first request that needs the store reports it
        logger.warning("could not prepare the runtime: %s", exc)
