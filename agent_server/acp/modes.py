"""Named agents as ACP session modes: `availableModes` in the answers of `session/new`, `load`, `resume` and
`fork`, and `session/set_mode`.

The first mode, `default`, is the server's own agent; each named agent is a mode of its name, described by the
agent's description. A session opens in the mode of the agent it was created with (its metadata's `agent`), else
`default`. Without named agents no modes are offered. The mode chosen applies to the session's next prompts on
this connection, unless a prompt's `_meta.agent_server.options.agent` names another.
"""

from __future__ import annotations

from acp.schema import SessionMode, SessionModeState

from agent_server.errors import InvalidArgument
from agent_server.runtime import AGENT_KEY, DEFAULT_AGENT, AgentDefinition, AgentRuntime
from agent_server.types import SessionInfo

DEFAULT_MODE = SessionMode(id=DEFAULT_AGENT, name="Default", description="The agent without a named agent's role.")


async def session_modes(runtime: AgentRuntime, current: str | None) -> SessionModeState | None:
    """The modes offered, `current` (an agent's name, or None: `default`) the one in force."""
    agents = (await runtime.agent_catalog()).agents
    if not agents:
        return None
    modes = [DEFAULT_MODE, *(SessionMode(id=a.name, name=a.name, description=a.description) for a in agents.values())]
    return SessionModeState(current_mode_id=current if current in agents else DEFAULT_AGENT, available_modes=modes)


def created_with(session: SessionInfo) -> str | None:
    """The agent a stored session was created with, if any."""
    agent = session.metadata.get(AGENT_KEY)
    return agent if isinstance(agent, str) else None


async def mode_agent(runtime: AgentRuntime, mode_id: str) -> AgentDefinition | None:
    """The agent a mode stands for (None: `default`).

    Raises:
        InvalidArgument: no such mode.
    """
    if mode_id == DEFAULT_AGENT:
        return None
    agents = (await runtime.agent_catalog()).agents
    if mode_id not in agents:
        known = ", ".join([DEFAULT_AGENT, *sorted(agents)])
        raise InvalidArgument(f"no session mode {mode_id!r} (modes: {known})")
    return agents[mode_id]
