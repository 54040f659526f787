"""Spans for tests: one process-wide tracer provider (OpenTelemetry allows one), exporting to a test's
`InMemorySpanExporter` only while that test captures, so other tests never accumulate spans.

The provider is installed globally, as `agent-server` installs its own when tracing turns on, so the MCP SDK's
request spans appear too (as in production). Tests that use it skip cleanly when the `otel` extra is missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs the otel extra: pip install 'agent-server[otel]'")

from opentelemetry import trace  # noqa: E402
from opentelemetry.context import Context  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402


class _Gate(SpanProcessor):
    """Hands ended spans to the capturing test's exporter, or drops them."""

    def __init__(self) -> None:
        self.exporter: InMemorySpanExporter | None = None

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        if self.exporter is not None:
            self.exporter.export([span])

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


_gate: _Gate | None = None


def _installed() -> _Gate:
    global _gate
    if _gate is None:
        if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            raise RuntimeError("another global tracer provider is set")
        _gate = _Gate()
        provider = TracerProvider()
        provider.add_span_processor(_gate)
        trace.set_tracer_provider(provider)
    return _gate


@dataclass
class Spans:
    exporter: InMemorySpanExporter

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
    gate = _installed()
    exporter = InMemorySpanExporter()
    gate.exporter = exporter
    try:
        yield Spans(exporter)
    finally:
        gate.exporter = None


def hex_ids(span: ReadableSpan) -> tuple[str, str]:
    assert span.context is not None
    return trace.format_trace_id(span.context.trace_id), trace.format_span_id(span.context.span_id)
