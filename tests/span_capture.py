"""Spans for tests: each capture has its own tracer provider (SDK, `InMemorySpanExporter`), handed to the
runtimes entered meanwhile through `agent_server.tracing.use_provider`; nothing is installed globally, so no other
test (nor this process's own MCP clients) is ever traced. The MCP SDK's request spans, which use the global
provider, are therefore not captured here: `tests/subprocess/test_traces.py` sees them, from a real server.
Tests that use it skip cleanly when the `otel` extra is missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs the otel extra: pip install 'agent-server[otel]'")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from agent_server.tracing import use_provider  # noqa: E402


@dataclass
class Spans:
    exporter: InMemorySpanExporter
    provider: TracerProvider

    def tracer(self, name: str) -> trace.Tracer:
        """A tracer of this capture's provider (a test's own "caller" spans)."""
        return self.provider.get_tracer(name)

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.all() if s.name.startswith(prefix)]

    def one(self, prefix: str) -> ReadableSpan:
        found = self.named(prefix)
        assert len(found) == 1, [s.name for s in self.all()]
        return found[0]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        ours = parent.context.span_id if parent.context else None
        return sorted(
            (s for s in self.all() if s.parent is not None and s.parent.span_id == ours),
            key=lambda s: s.start_time or 0,
        )

    def parent(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.parent is None:
            return None
        return next((s for s in self.all() if s.context and s.context.span_id == span.parent.span_id), None)

    def tree(self, root: ReadableSpan, keys: tuple[str, ...] = (), depth: int = 0) -> list[str]:
        """`root` and its descendants as indented lines, with the attributes named by `keys` (prefixes)."""
        attributes: dict[str, Any] = dict(root.attributes or {})
        shown = {k: v for k, v in attributes.items() if k.startswith(keys)} if keys else {}
        status = " ERROR" if root.status.status_code.name == "ERROR" else ""
        lines = [f"{'  ' * depth}{root.name}{status} {shown}".rstrip()]
        for child in self.children(root):
            lines += self.tree(child, keys, depth + 1)
        return lines


@contextmanager
def capture() -> Iterator[Spans]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with use_provider(provider):
        yield Spans(exporter, provider)
    provider.shutdown()


def hex_ids(span: ReadableSpan) -> tuple[str, str]:
    assert span.context is not None
    return trace.format_trace_id(span.context.trace_id), trace.format_span_id(span.context.span_id)
