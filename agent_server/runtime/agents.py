"""The runtime's named agents (`agent_server.named_agents`): one catalog per workspace, the model each agent names,
and how a turn's options take an agent's settings.

A turn's agent is the one its options name, else the one its session was created with (kept in the session's
metadata as `agent`); `default` names none. The agent's `max_tool_passes` and `output_schema` apply where the
caller chose none; its tools and the caller's `tools` both limit the turn's tools; its instructions join the system
prompt. Its `model`: an alias of the settings' `models` (Claude Code's `sonnet`, `opus`, `haiku` and `inherit` too,
when mapped there), else a provider spec (`openai:MODEL`, ...); none or `inherit`: the server's model. Each model is
built once and kept for the runtime's life.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from pydantic import TypeAdapter, ValidationError

from agent_server.errors import ConfigError, InvalidArgument
from agent_server.named_agents import DEFAULT_AGENT, AgentCatalog, AgentDefinition, Catalog
from agent_server.output_schema import validate_output_schema
from agent_server.runtime.choice import fixed_llm
from agent_server.settings import MODEL_SPECS, ModelChoice, Settings, parse_model_spec
from agent_server.turn_options import TurnOptions

if TYPE_CHECKING:
    from agent_server.agent.prompts import PromptPart
    from agent_server.llm.base import LLMClient

AGENT_KEY = "agent"
"""The session metadata key that keeps the agent a session was created with."""
CLAUDE_ALIASES = ("sonnet", "opus", "haiku")
INHERIT = "inherit"
CATALOGS_KEPT = 64
"""The catalogs of this many workspaces are kept (the least recently used is dropped, and read again if needed)."""


class NamedAgents:
    """See the module docstring; shared by every view of one runtime."""

    def __init__(self, settings: Settings, environ: Mapping[str, str]) -> None:
        self._settings = settings
        self._environ = environ
        self._catalogs: dict[Path, AgentCatalog] = {}
        self._models: dict[str, LLMClient | None] = {}

    async def catalog(self, workspace: Path) -> Catalog:
        catalog = self._catalogs.pop(workspace, None)  # re-inserted: the dict's order is the order of use
        if catalog is None:
            catalog = AgentCatalog(workspace, self._settings.agents)
            if len(self._catalogs) >= CATALOGS_KEPT:  # ACP sessions may name any number of workspaces
                del self._catalogs[next(iter(self._catalogs))]
        self._catalogs[workspace] = catalog
        return await catalog.current()

    async def chosen(self, workspace: Path, name: str | None) -> AgentDefinition | None:
        """The agent `name` names (None or `default`: none).

        Raises:
            InvalidArgument: no agent has that name.
        """
        if name is None or name == DEFAULT_AGENT:
            return None
        agents = (await self.catalog(workspace)).agents
        definition = agents.get(name)
        if definition is None:
            known = ", ".join(sorted(agents)) or "none are defined"
            raise InvalidArgument(f"no agent is named {name!r} (agents: {known}; `default`: the server's own)")
        return definition

    def model(self, definition: AgentDefinition) -> tuple[bool, LLMClient | None]:
        """(whether the agent has a model of its own, that model: None for the caller's own, `sampling`).

        Raises:
            ConfigError: the agent's model is neither an alias nor a provider spec, or cannot be built.
        """
        choice = self._choice(definition)
        if choice is None:
            return False, None
        key = choice.model_dump_json()
        if key not in self._models:
            self._models[key] = fixed_llm(self._settings.model_copy(update={"llm": choice}), self._environ)
        return True, self._models[key]

    def _choice(self, definition: AgentDefinition) -> ModelChoice | None:
        model, name = definition.model, definition.name
        if model is None:
            return None
        if model in self._settings.models:
            return self._settings.models[model]
        if model == INHERIT:
            return None
        if model in CLAUDE_ALIASES:
            raise ConfigError(
                f"agent {name!r} asks for model {model!r} (a Claude Code alias): map it in the settings' `models`, "
                f'e.g. "models": {{"{model}": "anthropic:MODEL"}}, or set the agent\'s model to `inherit`'
            )
        try:
            return TypeAdapter[Any](ModelChoice).validate_python(parse_model_spec(model))
        except (ValueError, ValidationError):
            aliases = ", ".join(sorted(self._settings.models)) or "none"
            raise ConfigError(
                f"agent {name!r}: model {model!r} is neither an alias of the settings' `models` ({aliases}) "
                f"nor a provider spec ({MODEL_SPECS})"
            ) from None


def with_agent(options: TurnOptions, definition: AgentDefinition | None) -> TurnOptions:
    """The turn's options with the agent's settings where the caller chose none (see the module docstring)."""
    if definition is None:
        return options.model_copy(update={"agent": None})
    update: dict[str, Any] = {"agent": definition.name}
    if options.max_tool_passes is None:
        update["max_tool_passes"] = definition.max_tool_passes
    if options.output_schema is None:
        update["output_schema"] = definition.output_schema
    return options.model_copy(update=update)


def agent_part(agent: AgentDefinition) -> PromptPart:
    """A named agent's instructions as a part of the system prompt."""
    from agent_server.agent.prompts import PromptPart

    title = f"Agent {agent.name}"
    return PromptPart(id=f"agent:{agent.name}", title=title, source=agent.source, body=agent.instructions)


async def checked_schema(options: TurnOptions) -> None:
    """Check that the caller's `output_schema` is a valid JSON Schema, in a worker thread (the door only bounded it).

    Raises:
        InvalidArgument: it is not.
    """
    if options.output_schema is None:
        return
    try:
        await anyio.to_thread.run_sync(validate_output_schema, options.output_schema)
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None
