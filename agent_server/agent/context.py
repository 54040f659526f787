"""What a turn needs from the outside world, passed in by the composition root.

The agent layer sees only protocols (`LLMClient`, `Toolset`, `SessionStore`) and the event
sink; `server/app.py` decides which implementations stand behind them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from agent_server.agent.progress import ProgressKeeper
from agent_server.agent.prompts import PromptPart
from agent_server.events import EventSink
from agent_server.llm.base import LLMClient
from agent_server.settings import Settings
from agent_server.store.base import SessionStore
from agent_server.telemetry import NO_TELEMETRY, Telemetry
from agent_server.tools.base import Toolset
from agent_server.turn_options import TurnOptions
from agent_server.types import ProjectGuidance, TurnRecord


class ProjectContext(Protocol):
    """What the workspace tells the agent: its instructions and skills (README "Project instructions and
    skills"); `tools.guidance.WorkspaceGuide` is the one the runtime gives."""

    async def guidance(self) -> ProjectGuidance:
        """The workspace root's instructions and the skills, as they are now."""
        ...


@dataclass(frozen=True, kw_only=True)
class AgentDeps:
    settings: Settings
    store: SessionStore
    llm: LLMClient
    tools: Toolset
    telemetry: Telemetry = NO_TELEMETRY
    """Where the turn reports its steps (tool calls, compactions, approvals) for tracing; the null hooks when off."""
    project: ProjectContext | None = None
    """The workspace's instructions and skills; None: none are read (the system prompt has neither)."""
    progress: ProgressKeeper | None = None
    """Writes the running turn's record to the store as it goes (`agent.progress`); None: only its start and its
    end are written."""


@dataclass(frozen=True, kw_only=True)
class TurnRequest:
    prompt: str
    session_id: str
    options: TurnOptions = field(default_factory=TurnOptions)
    """The caller's choices and what its door lends the turn, as the door passed them."""
    trace_id: str
    """`options.trace_id`, or a new one."""
    max_tool_passes: int
    """`options.max_tool_passes`, or the settings' default."""
    timeout_s: float | None = None
    """`options.timeout_s`, or the settings' default: for messages; `deadline` enforces it."""
    deadline: float | None = None
    """When the turn must end, on anyio's clock: the call's arrival plus `timeout_s`, so that time
    spent waiting for mounts and for an earlier turn of the session counts too."""
    notes: tuple[str, ...] = ()
    """Runtime facts the model must know this turn (e.g. tool servers that are unavailable)."""
    turn_id: str | None = None
    """The turn's id when the caller chose it already (a background turn is known before it begins)."""
    begun: bool = False
    """The turn's `running` record is stored already (a background turn is stored before it queues)."""
    cancel_reason: Callable[[], str | None] | None = None
    """Why the turn was cancelled when its caller did not cancel it (the park gave up on the client):
    asked once the turn is cancelled; None or no answer: "the caller cancelled the turn"."""
    instructions: PromptPart | None = None
    """The named agent's system prompt, added to the server's (`agent_part`)."""
    on_progress: Callable[[TurnRecord], None] | None = None
    """Told each new state of the turn's record while it runs (its progress so far: model calls, tool rounds,
    usage), and its final record once that is stored; must return at once."""


async def discard_event(_event: object) -> None:
    """An event sink for callers that do not stream."""


DISCARD: EventSink = discard_event
