"""OpenTelemetry traces of turns, model calls, tool calls, compactions and approvals (README "Traces").

The decision to trace is taken here, once per runtime (`tracing_on`), without importing OpenTelemetry's SDK:
settings `tracing.enabled` when set; otherwise the standard environment (an exporter configured through
`OTEL_TRACES_EXPORTER` or an OTLP endpoint, and `OTEL_SDK_DISABLED` not `true`). The SDK comes from the
optional extra `agent-server[otel]`; when tracing is off nothing of it, nor of this package's other modules,
is imported, and the loop runs with the null hooks of `agent_server.telemetry`.

When tracing is on, `opened` (entered with the runtime) loads the SDK in a worker thread, takes the tracer
provider (one the program set up itself, else one made from the `OTEL_*` environment and installed globally,
so that the MCP SDK's own request spans join the same traces), and gives the hooks and the model-client
wrapper the runtime hands to every turn. On exit it flushes what is pending (bounded, off the event loop).
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import AsyncGenerator, Generator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING

import anyio.to_thread

from agent_server.errors import ConfigError
from agent_server.settings import Settings

if TYPE_CHECKING:
    from agent_server.tracing.setup import Tracing

logger = logging.getLogger(__name__)

INSTALL = "pip install 'agent-server[otel]'"
_SDK_MODULES = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")


def asked_by_environment(environ: Mapping[str, str]) -> bool:
    """Whether the standard OpenTelemetry variables configure a trace exporter."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporters:
        return exporters != "none"
    return bool(environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def sdk_installed() -> bool:
    try:
        return all(importlib.util.find_spec(name) is not None for name in _SDK_MODULES)
    except ModuleNotFoundError:  # a parent package is missing
        return False


def tracing_on(settings: Settings, environ: Mapping[str, str]) -> bool:
    """Whether this runtime traces (see the module docstring).

    Raises:
        ConfigError: settings `tracing.enabled` is true but the `otel` extra is not installed.
    """
    enabled = settings.tracing.enabled
    if enabled is False or (enabled is None and not asked_by_environment(environ)):
        return False
    if sdk_installed():
        return True
    if enabled:
        raise ConfigError(f"tracing.enabled is true but OpenTelemetry's SDK is not installed: {INSTALL}")
    logger.warning("OTEL_* variables ask for traces but OpenTelemetry's SDK is not installed (%s): no traces", INSTALL)
    return False


_override: list[object] = []
"""The providers given to `use_provider`, innermost last."""


@contextmanager
def use_provider(provider: object) -> Generator[None]:
    """Runtimes entered while the block runs trace with `provider` (an OpenTelemetry `TracerProvider`) instead of
    the global one, which is then neither used nor installed: for tests, or a program that keeps agent-server's
    spans apart from its own."""
    _override.append(provider)
    try:
        yield
    finally:
        _override.remove(provider)


def overriding_provider() -> object | None:
    return _override[-1] if _override else None


@asynccontextmanager
async def opened(settings: Settings, environ: Mapping[str, str], *, provider: str | None) -> AsyncGenerator[Tracing]:
    """The tracing of one runtime while the block runs; `provider` names the configured model's provider."""

    # Importing the SDK, the exporter and protobuf takes a while, and so does making the provider (resource
    # detection, the exporter's session, the batch thread): not on the event loop.
    def build() -> Tracing:
        from agent_server.tracing.setup import Tracing

        return Tracing.from_environment(settings, environ, provider=provider, given=overriding_provider())

    tracing = await anyio.to_thread.run_sync(build)
    try:
        yield tracing
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(tracing.flush)
