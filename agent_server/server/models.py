"""Which model a turn uses: the configured provider, or the connected client's own (sampling).

Selection (`--llm`, else the config's `llm`, else the environment):
`script:PATH` and `openai:MODEL` are fixed providers built at startup. `sampling` (or no setting
and no `OPENAI_API_KEY`/`OPENAI_BASE_URL` in the environment) uses the client's model through
`sampling/createMessage`, which needs a handshake-era connection from a client that declared the
`sampling` capability; otherwise the turn fails with a message saying so and how to configure a
model. With `OPENAI_API_KEY` or `OPENAI_BASE_URL` set and no `--llm`, `openai` is the default and
`AGENT_SERVER_MODEL` names the model.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from agent_server.errors import ConfigError
from agent_server.settings import Settings

if TYPE_CHECKING:
    from agent_server.llm.base import LLMClient


def fixed_llm(settings: Settings, environ: Mapping[str, str] | None = None) -> LLMClient | None:
    """The provider chosen at startup, or None when each request should use the client's model.

    Raises:
        ConfigError: the spec names an unknown provider, a bad script, or lacks a model name.
    """
    env = os.environ if environ is None else environ
    spec = settings.llm
    if spec is None and (env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL")):
        model = env.get("AGENT_SERVER_MODEL")
        if not model:
            raise ConfigError(
                "OPENAI_API_KEY/OPENAI_BASE_URL is set, so the model must be named: set AGENT_SERVER_MODEL"
            )
        spec = f"openai:{model}"
    if spec is None or spec == "sampling":
        return None
    kind, _, arg = spec.partition(":")
    if kind == "script" and arg:
        from agent_server.llm.scripted import ScriptedLLM

        return ScriptedLLM.from_file(arg)
    if kind == "openai":
        return _openai(settings, arg or settings.openai.model, env)
    raise ConfigError(f"unknown --llm {spec!r}: expected script:PATH, openai:MODEL or sampling")


def _openai(settings: Settings, model: str | None, env: Mapping[str, str]) -> LLMClient:
    if not model:
        raise ConfigError("--llm openai needs a model: openai:MODEL, or openai.model in the config file")
    from agent_server.llm.openai import OpenAIChatLLM

    options = settings.openai
    if env.get("OPENAI_BASE_URL"):
        options = options.model_copy(update={"base_url": env["OPENAI_BASE_URL"]})
    return OpenAIChatLLM(options, api_key=env.get("OPENAI_API_KEY") or None, model=model)
