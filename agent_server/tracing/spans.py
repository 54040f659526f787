"""The spans of a turn, after the OpenTelemetry GenAI semantic conventions (agent, inference and tool spans).

    invoke_agent agent-server     INTERNAL  one per turn, from the call's arrival (queueing included)
      compact_history             INTERNAL  a compaction, with its `chat` span when the model summarised
      chat {model}                CLIENT    one per model call (`tracing/llm.py`)
      execute_tool {tool}         INTERNAL  one per tool call the model asked for, approval included
        approval {tool}           INTERNAL  the gate's question and its answer, when it stopped at the call
        (MCP SDK) MCP send tools/call ...   a mounted server's call: its `_meta.traceparent` is this context

A turn is a child of the caller's `traceparent` when the front door was given one, else of the span current
where the turn was started (the MCP SDK's request span). `error.type` names the failure: the turn record's
error type (`model_error`, `timed_out`, ...), `tool_error` for a failed tool call, the `ModelError` type for a
model call; such spans have status ERROR. A cancelled turn or call is not an error: its span ends with
`agent_server.cancelled` true. Content is recorded only through `Content` (settings `tracing.content`).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agent_server.trace_context import TraceContext, carrying
from agent_server.tracing.content import Content
from agent_server.types import ApprovalRecord, CompactionRecord, ToolCall, ToolResult, TurnRecord, Usage

AGENT = "agent-server"
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
CONVERSATION = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
ERROR_TYPE = "error.type"
CANCELLED = "agent_server.cancelled"
ERROR_STATUSES = frozenset({"failed", "timed_out", "interrupted"})
"""Turn endings that are failures (span status ERROR); halted, truncated and cancelled ones are not."""

MAX_NAME_CHARS = 256
"""What a span keeps of a name or an id the model chose (a tool name, a call id) or a provider sent (a model)."""

_W3C = TraceContextTextMapPropagator()
PROVIDERS = {"openai": "openai", "openai-responses": "openai", "anthropic": "anthropic"}
"""Our model clients' names -> the conventions' `gen_ai.provider.name` (others keep their own name)."""


def short(value: str) -> str:
    return value if len(value) <= MAX_NAME_CHARS else value[:MAX_NAME_CHARS] + "..."


def provider_name(client: str | None) -> str | None:
    return PROVIDERS.get(client, client) if client else None


def usage_attributes(usage: Usage) -> dict[str, int]:
    found = {
        "gen_ai.usage.input_tokens": usage.prompt_tokens,
        "gen_ai.usage.output_tokens": usage.completion_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens,
        "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens,
    }
    return {key: value for key, value in found.items() if value is not None}


def failed(span: Span, error_type: str) -> None:
    span.set_attribute(ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR))


@contextmanager
def watching(span: Span) -> Generator[None]:
    """Record how the block ended on `span`: cancellation is not an error, any other exception is (its `type`)."""
    try:
        yield
    except Exception as exc:
        named = getattr(exc, "type", None)  # our errors' own type (`model_error`, ...), else the class
        failed(span, named if isinstance(named, str) else type(exc).__qualname__)
        raise
    except BaseException:
        span.set_attribute(CANCELLED, True)
        raise


class OtelTurn:
    """A turn's `invoke_agent` span (`agent_server.telemetry.TurnTrace`)."""

    def __init__(self, span: Span, content: Content | None) -> None:
        self._span = span
        self._content = content
        self._ended = False
        context = span.get_span_context()
        self.trace_id: str | None = trace.format_trace_id(context.trace_id) if context.is_valid else None

    @contextmanager
    def running(self) -> Generator[object]:
        token = otel_context.attach(trace.set_span_in_context(self._span))
        try:
            with watching(self._span):
                yield self
        finally:
            otel_context.detach(token)

    def began(self, *, session_id: str, turn_id: str) -> None:
        self._span.set_attributes({CONVERSATION: session_id, "agent_server.turn.id": turn_id})

    def finish(self, record: TurnRecord) -> None:
        span = self._span
        span.set_attributes({"agent_server.turn.status": record.status, **usage_attributes(record.usage)})
        if record.status == "cancelled":
            span.set_attribute(CANCELLED, True)
        if record.error is not None:
            span.set_attribute(ERROR_TYPE, record.error.type)
        if record.status in ERROR_STATUSES:
            span.set_status(Status(StatusCode.ERROR))
        if self._content is not None:
            span.set_attribute("gen_ai.input.messages", self._content.prompt(record.prompt))
            span.set_attribute("gen_ai.output.messages", self._content.answer(record.final_text))

    def end(self) -> None:
        if not self._ended:
            self._ended = True
            self._span.end()


class OtelTool:
    def __init__(self, span: Span, content: Content | None) -> None:
        self._span = span
        self._content = content

    def ended(self, result: ToolResult) -> None:
        if result.is_error:
            failed(self._span, "tool_error")
        if self._content is not None:
            self._span.set_attribute("gen_ai.tool.call.result", self._content.result(result))


class OtelCompaction:
    def __init__(self, span: Span) -> None:
        self._span = span

    def ended(self, record: CompactionRecord) -> None:
        self._span.set_attributes(
            {
                "agent_server.compaction.mode": record.mode,
                "agent_server.compaction.compacted_messages": record.compacted_message_count,
                "agent_server.compaction.preserved_messages": record.preserved_message_count,
                "agent_server.compaction.tokens_before": record.estimated_tokens_before,
                "agent_server.compaction.tokens_after": record.estimated_tokens_after,
                "agent_server.compaction.dry_run": record.dry_run,
            }
        )


class OtelTelemetry:
    """`agent_server.telemetry.Telemetry` over an OpenTelemetry tracer."""

    def __init__(self, tracer: trace.Tracer, *, content: Content | None, provider: str | None) -> None:
        self._tracer = tracer
        self._content = content
        self._provider = provider_name(provider)

    def turn(self, parent: TraceContext | None, *, model: str | None = None) -> OtelTurn:
        attributes: dict[str, Any] = {OPERATION: "invoke_agent", "gen_ai.agent.name": AGENT}
        if self._provider:
            attributes[PROVIDER] = self._provider
        if model:
            attributes[REQUEST_MODEL] = model
        context = _W3C.extract(parent.carrier()) if parent is not None else None
        span = self._tracer.start_span(f"invoke_agent {AGENT}", context=context, attributes=attributes)
        return OtelTurn(span, self._content)

    @contextmanager
    def tool(self, call: ToolCall) -> Generator[OtelTool]:
        attributes: dict[str, Any] = {
            OPERATION: "execute_tool",
            "gen_ai.tool.name": short(call.name),
            "gen_ai.tool.call.id": short(call.id),
            "gen_ai.tool.type": "function",
        }
        if self._content is not None:
            attributes["gen_ai.tool.call.arguments"] = self._content.arguments(call)
        with self._span(f"execute_tool {short(call.name)}", attributes) as span, carrying(_context_of(span)):
            yield OtelTool(span, self._content)

    @contextmanager
    def compaction(self, session_id: str, reason: str) -> Generator[OtelCompaction]:
        attributes = {CONVERSATION: session_id, "agent_server.compaction.reason": reason}
        with self._span("compact_history", attributes) as span:
            yield OtelCompaction(span)

    def approval(self, record: ApprovalRecord) -> None:
        end = time.time_ns()
        span = self._tracer.start_span(
            f"approval {short(record.tool)}",
            start_time=end - int(record.latency_s * 1e9),
            attributes={
                "gen_ai.tool.name": short(record.tool),
                "gen_ai.tool.call.id": short(record.call_id),
                "agent_server.approval.decision": record.decision,
                "agent_server.approval.channel": record.channel,
                "agent_server.approval.latency_s": record.latency_s,
            },
        )
        span.end(end_time=end)

    @contextmanager
    def _span(self, name: str, attributes: dict[str, Any]) -> Generator[Span]:
        with (
            self._tracer.start_as_current_span(
                name, attributes=attributes, record_exception=False, set_status_on_exception=False
            ) as span,
            watching(span),
        ):
            yield span


def _context_of(span: Span) -> TraceContext | None:
    """`span`'s W3C context, as a mounted server's call carries it in `_meta` (SEP-414)."""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier, context=trace.set_span_in_context(span))
    return TraceContext.from_meta(carrier)
