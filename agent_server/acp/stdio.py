"""`serve_acp`: the ACP agent over stdin/stdout until stdin closes or SIGTERM/SIGINT arrives.

stdout is the wire and carries only ACP JSON-RPC: while serving, the wire moves to a private
descriptor and fd 1 points at stderr, so a stray `print` or a child process writing to fd 1 can
never corrupt the stream (restored on exit). The wire is written through asyncio's pipe transport,
as the library's own stdio helper does (which would write to fd 1 itself). Lines are read and written by
`NdjsonWire` (`acp/wire.py`), not by the library's own framing: a line that is no message is answered
with a JSON-RPC error and the connection goes on, and a line longer than `MAX_LINE_BYTES` ends it.

Shutdown, either way: the connection closes (its request tasks are cancelled, so running turns are
recorded `cancelled`), every session's mounted servers stop, and the store closes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import cast

import anyio
from acp import Agent
from acp.agent.connection import AgentSideConnection

from agent_server.acp.agent import AcpAgent
from agent_server.acp.wire import NdjsonWire
from agent_server.doors.signals import cancel_on_signal
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
    async with _wire() as (reader, writer):
        # The library routes only the methods the agent has (the others answer "method not found").
        wire = NdjsonWire(reader, writer)
        conn = AgentSideConnection(cast(Agent, agent), wire, listening=False, use_unstable_protocol=True)
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


@asynccontextmanager
async def _wire() -> AsyncGenerator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """stdin as a stream reader, and the wire (fd 1 moved to a private descriptor) as a stream writer."""
    loop = asyncio.get_running_loop()
    sys.stdout.flush()
    wire = os.dup(1)
    os.dup2(2, 1)
    reader = asyncio.StreamReader()  # read in chunks by `NdjsonWire`, which bounds a line
    read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    write_transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(wire, "wb", buffering=0, closefd=False)
    )
    writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
    try:
        yield reader, writer
    finally:
        read_transport.close()
        write_transport.close()
        os.dup2(wire, 1)
        os.close(wire)
