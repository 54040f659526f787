"""The tracer provider, from OpenTelemetry's own configuration (imported only when tracing is on).

A provider given to `agent_server.tracing.use_provider`, or one the program installed itself (an embedding
application that set up OpenTelemetry), is used as it is.
Otherwise one is made the SDK's way: `TracerProvider()` reads the sampler (`OTEL_TRACES_SAMPLER`,
`OTEL_TRACES_SAMPLER_ARG`) and span limits, `Resource.create()` the service name and resource attributes
(`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`; the service is `agent-server` when they name none),
`OTLPSpanExporter()` the endpoint, headers, timeout, compression and certificates (`OTEL_EXPORTER_OTLP_*`),
and `BatchSpanProcessor` its queue and delays (`OTEL_BSP_*`). Of `OTEL_TRACES_EXPORTER` (default `otlp`),
`otlp` (OTLP over HTTP with protobuf, the extra's exporter) and `console` (to stderr: stdout is the wire) are
served; `none` means no exporter. The provider is then installed globally, so that the MCP SDK's own spans
(one per request served, one per request sent to a mounted server) are exported in the same traces.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from agent_server.llm.base import LLMClient
from agent_server.settings import Settings
from agent_server.tracing.content import Content, environment_secrets
from agent_server.tracing.llm import TracedLLM
from agent_server.tracing.spans import OtelTelemetry
from agent_server.version import version

logger = logging.getLogger(__name__)

SERVICE = "agent-server"
FLUSH_TIMEOUT_MS = 1000
"""How long leaving the runtime waits for pending spans to be exported."""


class Tracing:
    """One runtime's tracing: the hooks for the loop, the model wrapper, and the provider to flush."""

    def __init__(self, provider: trace.TracerProvider, *, content: Content | None, model_provider: str | None) -> None:
        self.provider = provider
        tracer = provider.get_tracer(SERVICE, version())
        self.telemetry = OtelTelemetry(tracer, content=content, provider=model_provider)
        self._tracer = tracer
        self._content = content
        self._model_provider = model_provider

    @classmethod
    def from_environment(
        cls, settings: Settings, environ: Mapping[str, str], *, provider: str | None, given: object | None = None
    ) -> Tracing:
        """`given`: the provider of `agent_server.tracing.use_provider`, if any (see `tracer_provider`)."""
        options = settings.tracing
        content = None
        if options.content:
            secrets = [s for config in settings.mcp_servers.values() for s in config.secrets]
            content = Content([*secrets, *environment_secrets(environ)], options.content_max_chars)
        return cls(tracer_provider(environ, given), content=content, model_provider=provider)

    def wrap_llm(self, llm: LLMClient) -> LLMClient:
        return TracedLLM(llm, self._tracer, content=self._content, provider=self._model_provider)

    def flush(self) -> None:
        """Export what is pending (blocking, bounded): call it from a worker thread."""
        flush = getattr(self.provider, "force_flush", None)
        if callable(flush):
            flush(FLUSH_TIMEOUT_MS)


def tracer_provider(environ: Mapping[str, str], given: object | None = None) -> trace.TracerProvider:
    """`given` (the provider of `use_provider`), else the program's own if it set one, else a new one from the
    environment, installed globally."""
    if isinstance(given, trace.TracerProvider):
        return given
    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider):
        return current
    provider = TracerProvider(resource=_resource())
    for exporter in _exporters(environ):
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider


def _resource() -> Resource:
    resource = Resource.create({SERVICE_VERSION: version()})
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: SERVICE}))
    return resource


def _exporters(environ: Mapping[str, str]) -> list[SpanExporter]:
    exporters: list[SpanExporter] = []
    for name in (n.strip().lower() for n in environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")):
        if name == "otlp":
            exporters.append(_otlp(environ))
        elif name == "console":
            exporters.append(ConsoleSpanExporter(out=sys.stderr))
        elif name and name != "none":
            logger.warning("OTEL_TRACES_EXPORTER=%s is not served (otlp, console or none): ignored", name)
    return exporters


def _otlp(environ: Mapping[str, str]) -> SpanExporter:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    if protocol and protocol.strip() != "http/protobuf":
        logger.warning("OTLP protocol %s is not served; exporting with http/protobuf", protocol.strip())
    return OTLPSpanExporter()
