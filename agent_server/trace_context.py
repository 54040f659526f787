"""Leaf module: a caller's W3C trace context, as MCP and ACP requests carry it in `_meta`.

MCP reserves the `_meta` keys `traceparent` and `tracestate` for W3C Trace Context (SEP-414: the values are
those of the HTTP headers of the same names); ACP requests may carry them the same way. A front door reads
them with `TraceContext.from_meta` and hands the result to the runtime, whose turn span then continues the
caller's trace (README "Traces"). The other way, a traced tool call sets the context its outgoing requests
carry (`carrying`), and the mounted servers' client puts it in each call's `_meta` (`outgoing`). Nothing here
imports OpenTelemetry: the value is plain data, cheap to make whether tracing is on or off, and a malformed
header is simply no context (the W3C rule: start afresh).
"""

from __future__ import annotations

import re
from collections.abc import Generator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"

_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")
_MAX_TRACESTATE_CHARS = 512
"""The W3C limit a vendor must propagate (32 members); a longer one is dropped rather than cut mid-member."""


@dataclass(frozen=True)
class TraceContext:
    """A valid `traceparent` (version 00 or later, non-zero ids) and the `tracestate` that came with it."""

    traceparent: str
    tracestate: str | None = None

    @property
    def trace_id(self) -> str:
        """The 32 lowercase hex digits of the trace id (what a turn record's `trace_id` then says)."""
        return self.traceparent.split("-")[1]

    @classmethod
    def parse(cls, traceparent: object, tracestate: object = None) -> TraceContext | None:
        """The context of these header values, or None when `traceparent` is not a valid W3C one."""
        if not isinstance(traceparent, str) or len(traceparent) > 256:
            return None
        match = _TRACEPARENT.match(traceparent.strip())
        if match is None:
            return None
        version, trace_id, span_id, _flags, rest = match.groups()
        if version == "ff" or (version == "00" and rest) or set(trace_id) == {"0"} or set(span_id) == {"0"}:
            return None
        state = tracestate if isinstance(tracestate, str) and 0 < len(tracestate) <= _MAX_TRACESTATE_CHARS else None
        return cls(traceparent=match.group(0), tracestate=state)

    @classmethod
    def from_meta(cls, meta: object) -> TraceContext | None:
        """The caller's context from a request's `_meta` (a mapping; anything else has none)."""
        if not isinstance(meta, Mapping):
            return None
        fields: Mapping[object, object] = meta  # pyright: ignore[reportUnknownVariableType]
        return cls.parse(fields.get(TRACEPARENT), fields.get(TRACESTATE))

    def carrier(self) -> dict[str, str]:
        """The context as `_meta` (or HTTP header) entries."""
        entries = {TRACEPARENT: self.traceparent}
        if self.tracestate is not None:
            entries[TRACESTATE] = self.tracestate
        return entries


_outgoing: ContextVar[TraceContext | None] = ContextVar("agent_server_outgoing_trace", default=None)


@contextmanager
def carrying(context: TraceContext | None) -> Generator[None]:
    """While the block runs (in this task and those it starts), requests to mounted servers carry `context`."""
    token = _outgoing.set(context)
    try:
        yield
    finally:
        _outgoing.reset(token)


def outgoing() -> TraceContext | None:
    """The trace context a request made here should carry in its `_meta` (None: none to add)."""
    return _outgoing.get()
