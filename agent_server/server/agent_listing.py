"""Named agents as MCP tools: each agent is also a tool of its own name, described by the agent's description, whose
arguments are `run_turn`'s without `agent` (hosts pick tools by description: that is how a host delegates to a
specialist). A call of it is `run_turn` with `agent` set. A name that clashes with one of the server's own tools is
left out, logged once with the reason (the agent stays reachable as `run_turn(agent=...)`).

The set is read from the runtime's catalog (`AgentRuntime.agent_catalog`, re-read when a definition file changed).
`AgentTools.changed` tells, once per change, that a client which listed the tools should list them again
(`notifications/tools/list_changed`, which the handshake era delivers on the connection; 2026-07-28 clients
re-list on their own).
"""

from __future__ import annotations

import copy
import logging
from functools import cache
from typing import Any

import mcp_types as types

from agent_server.runtime import AgentRuntime
from agent_server.server.listing import tool_names, wire_tools

logger = logging.getLogger(__name__)


class AgentTools:
    """The agent tools of one server (see the module docstring)."""

    def __init__(self, runtime: AgentRuntime) -> None:
        self._runtime = runtime
        self._listed: int | None = None
        """The catalog version the client was last given (None: it has not listed the tools)."""
        self._clashes_logged: set[str] = set()

    async def tools(self) -> list[types.Tool]:
        """The agent tools, as `tools/list` adds them to the server's own; the client now knows this set."""
        catalog = await self._runtime.agent_catalog()
        self._listed = catalog.version
        listed: list[types.Tool] = []
        for agent in catalog.agents.values():
            if agent.name in tool_names():
                if agent.name not in self._clashes_logged:
                    self._clashes_logged.add(agent.name)
                    logger.warning(
                        "agent %r (%s) is not listed as a tool: the server has a tool of that name; "
                        "call run_turn with agent=%r",
                        agent.name,
                        agent.source,
                        agent.name,
                    )
                continue
            listed.append(_agent_tool(agent.name, agent.description))
        return listed

    async def agent_of(self, tool: str) -> str | None:
        """The agent a tool name calls, or None when it is no agent tool."""
        if tool in tool_names():
            return None
        return tool if tool in (await self._runtime.agent_catalog()).agents else None

    async def changed(self) -> bool:
        """Whether the set changed since the client listed the tools (True once per change)."""
        if self._listed is None:
            return False
        version = (await self._runtime.agent_catalog()).version
        if version == self._listed:
            return False
        self._listed = version
        return True


def as_run_turn(params: types.CallToolRequestParams, agent: str) -> types.CallToolRequestParams:
    """A call of an agent's tool as the `run_turn` call it stands for.

    Raises:
        ValueError: the arguments name an agent themselves.
    """
    arguments = dict(params.arguments or {})
    if "agent" in arguments:
        raise ValueError(f"the tool {agent!r} runs the agent {agent!r}: it takes no `agent` argument")
    return params.model_copy(update={"name": "run_turn", "arguments": {**arguments, "agent": agent}})


def _agent_tool(name: str, description: str) -> types.Tool:
    run_turn = _run_turn_tool()
    annotations = run_turn.annotations
    if annotations is not None:
        annotations = annotations.model_copy(update={"title": f"Run the {name} agent"})
    update = {"name": name, "title": None, "description": description, "input_schema": _agent_input_schema()}
    return run_turn.model_copy(update={**update, "annotations": annotations})


@cache
def _run_turn_tool() -> types.Tool:
    return next(tool for tool in wire_tools() if tool.name == "run_turn")


@cache
def _agent_input_schema() -> dict[str, Any]:
    schema = copy.deepcopy(_run_turn_tool().input_schema)
    schema.get("properties", {}).pop("agent", None)
    return schema
