"""What the settings (or the environment) name: the model (`fixed_llm`) and the session store (`store_opener`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from agent_server.errors import ConfigError
from agent_server.redaction import redact_url
from agent_server.settings import (
    AnthropicModel,
    OpenAIModel,
    OpenAIOptions,
    OpenAIResponsesModel,
    SamplingModel,
    ScriptModel,
    Settings,
)

if TYPE_CHECKING:
    from agent_server.llm.base import LLMClient, ModelRequest, ModelResponse, RetryCallback, TextCallback
    from agent_server.store.base import SessionStore

POSTGRES_EXTRA = "pip install 'agent-server[postgres]'"


def fixed_llm(settings: Settings, environ: Mapping[str, str]) -> LLMClient | None:
    """The model the settings (or the environment) name, or None: each call then uses the caller's own.

    A script, an OpenAI (Chat Completions or Responses) or an Anthropic model is built here (the provider's
    module imported only then, never at start); `sampling` (or no setting and no
    `OPENAI_API_KEY`/`OPENAI_BASE_URL`) means the caller's model. With `OPENAI_API_KEY` or
    `OPENAI_BASE_URL` set and no `llm`, `openai` is the default and `AGENT_SERVER_MODEL` names the model.

    Raises:
        ConfigError: a bad script, or no model name.
    """
    choice = settings.llm
    if choice is None and (environ.get("OPENAI_API_KEY") or environ.get("OPENAI_BASE_URL")):
        model = environ.get("AGENT_SERVER_MODEL")
        if not model:
            raise ConfigError(
                "OPENAI_API_KEY/OPENAI_BASE_URL is set, so the model must be named: set AGENT_SERVER_MODEL"
            )
        choice = OpenAIModel(model=model)
    match choice:
        case None | SamplingModel():
            return None
        case ScriptModel(path=path):
            from agent_server.llm.scripted import ScriptedLLM

            return ScriptedLLM.from_file(path)
        case OpenAIModel(model=model):
            return _openai(settings, model or settings.openai.model, environ)
        case OpenAIResponsesModel(model=model):
            return _openai_responses(settings, model or settings.openai.model, environ)
        case AnthropicModel(model=model):
            return _anthropic(settings, model or settings.anthropic.model, environ)


class LazyLLM:
    """A provider named by the settings, built (its module and httpx imported) by its first call, never at
    start: a server with a model configured starts, and lists its tools, as fast as one without.

    What can be checked without importing it (the model name, the base URL's shape) was checked when this was
    made, so a configuration error still stops the server at start.
    """

    def __init__(self, name: str, build: Callable[[], LLMClient]) -> None:
        self.name = name
        self._build = build
        self._llm: LLMClient | None = None

    @property
    def built(self) -> LLMClient:
        if self._llm is None:
            self._llm = self._build()
        return self._llm

    async def complete(
        self, request: ModelRequest, *, on_text: TextCallback | None = None, on_retry: RetryCallback | None = None
    ) -> ModelResponse:
        return await self.built.complete(request, on_text=on_text, on_retry=on_retry)


def _check_base_url(base_url: str, example: str) -> None:
    """The shape of a base URL, checked at start (the provider checks it again with httpx when built).

    Raises:
        ConfigError: not an http(s) URL with a host.
    """
    try:
        parts = urlsplit(base_url)
        host = parts.hostname
    except ValueError as exc:
        raise ConfigError(f"invalid base URL: {exc}") from None
    if parts.scheme not in {"http", "https"} or not host:
        raise ConfigError(f"the base URL must be an http:// or https:// URL with a host, such as {example}")


def _openai_options(settings: Settings, environ: Mapping[str, str]) -> OpenAIOptions:
    options = settings.openai
    if environ.get("OPENAI_BASE_URL"):
        options = options.model_copy(update={"base_url": environ["OPENAI_BASE_URL"]})
    return options


def _openai(settings: Settings, model: str | None, environ: Mapping[str, str]) -> LLMClient:
    if not model:
        raise ConfigError("--llm openai needs a model: openai:MODEL, or openai.model in the config file")
    options = _openai_options(settings, environ)
    _check_base_url(options.base_url, "http://127.0.0.1:8080/v1")
    key = environ.get("OPENAI_API_KEY") or None

    def build() -> LLMClient:
        from agent_server.llm.openai import OpenAIChatLLM
        from agent_server.llm.prices import price_table

        prices = price_table(options.prices, settings.prices)
        return OpenAIChatLLM(options, api_key=key, model=model, prices=prices)

    return LazyLLM("openai", build)


def _openai_responses(settings: Settings, model: str | None, environ: Mapping[str, str]) -> LLMClient:
    if not model:
        raise ConfigError(
            "--llm openai-responses needs a model: openai-responses:MODEL, or openai.model in the config file"
        )
    options = _openai_options(settings, environ)
    _check_base_url(options.base_url, "https://api.openai.com/v1")
    key = environ.get("OPENAI_API_KEY") or None

    def build() -> LLMClient:
        from agent_server.llm.openai_responses import OpenAIResponsesLLM
        from agent_server.llm.prices import price_table

        prices = price_table(options.prices, settings.prices)
        return OpenAIResponsesLLM(options, api_key=key, model=model, prices=prices)

    return LazyLLM("openai-responses", build)


def _anthropic(settings: Settings, model: str | None, environ: Mapping[str, str]) -> LLMClient:
    if not model:
        raise ConfigError("--llm anthropic needs a model: anthropic:MODEL, or anthropic.model in the config file")
    options = settings.anthropic
    if environ.get("ANTHROPIC_BASE_URL"):
        options = options.model_copy(update={"base_url": environ["ANTHROPIC_BASE_URL"]})
    _check_base_url(options.base_url, "https://api.anthropic.com")
    key = environ.get("ANTHROPIC_API_KEY") or None

    def build() -> LLMClient:
        from agent_server.llm.anthropic import AnthropicLLM
        from agent_server.llm.prices import price_table

        return AnthropicLLM(options, api_key=key, model=model, prices=price_table(settings.prices))

    return LazyLLM("anthropic", build)


def store_opener(settings: Settings) -> Callable[[], Awaitable[SessionStore]]:
    """How to open the session store the settings name: SQLite in the state dir (the default), or the
    PostgreSQL database of `store_url`. Checked now, opened later (by the first call that needs it).

    Raises:
        ConfigError: `store_url` names PostgreSQL and psycopg (the `postgres` extra) is not installed.
    """
    url = settings.store_url
    if url is None:

        async def open_sqlite() -> SessionStore:
            from agent_server.store.sqlite import SqliteStore  # by the first call: start-up stays light

            return await SqliteStore.open(settings.state_path)

        return open_sqlite
    try:
        from agent_server.store.postgres import PostgresStore
    except ImportError as exc:  # psycopg, psycopg_pool, or psycopg's libpq wrapper
        if not (exc.name or "psycopg").startswith("psycopg"):
            raise
        raise ConfigError(
            f"the store {redact_url(url)} needs the PostgreSQL driver, which is not installed ({exc}): {POSTGRES_EXTRA}"
        ) from exc
    return lambda: PostgresStore.open(url)
