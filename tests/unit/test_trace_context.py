"""W3C trace context from a request's `_meta` (SEP-414), and the rule for a turn record's `trace_id`."""

from __future__ import annotations

import pytest

from agent_server.telemetry import NO_TELEMETRY, turn_trace_id
from agent_server.trace_context import TraceContext, carrying, outgoing

VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_valid_traceparent_and_its_tracestate_are_read_from_meta() -> None:
    context = TraceContext.from_meta({"traceparent": VALID, "tracestate": "congo=t61rcWkgMzE", "other": 1})
    assert context == TraceContext(VALID, "congo=t61rcWkgMzE")
    assert context.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert context.carrier() == {"traceparent": VALID, "tracestate": "congo=t61rcWkgMzE"}


@pytest.mark.parametrize(
    "header",
    [
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # zero span id
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # the forbidden version
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",  # version 00 has exactly four fields
        "00-4bf92f3577b34da6-00f067aa0ba902b7-01",
        "not a header",
        "",
        7,
        None,
        "0" * 10_000,
    ],
)
def test_anything_but_a_valid_traceparent_is_no_context(header: object) -> None:
    assert TraceContext.from_meta({"traceparent": header}) is None


def test_a_later_version_may_carry_more_fields_and_a_huge_tracestate_is_dropped() -> None:
    later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes-next"
    assert TraceContext.parse(later) == TraceContext(later)
    assert TraceContext.parse(VALID, "k=v," * 500) == TraceContext(VALID)
    assert TraceContext.from_meta(None) is None and TraceContext.from_meta(["traceparent"]) is None


def test_the_record_trace_id_prefers_the_span_then_the_traceparent_then_the_callers_id() -> None:
    class Traced:
        trace_id = "f" * 32

    caller = TraceContext(VALID)
    assert turn_trace_id(Traced(), caller, "mine") == "f" * 32  # type: ignore[arg-type]
    assert turn_trace_id(NO_TELEMETRY.turn(caller), caller, "mine") == caller.trace_id
    assert turn_trace_id(NO_TELEMETRY.turn(None), None, "mine") == "mine"
    assert turn_trace_id(NO_TELEMETRY.turn(None), None, None) is None


def test_the_outgoing_context_is_set_only_inside_the_block() -> None:
    assert outgoing() is None
    with carrying(TraceContext(VALID)):
        assert outgoing() == TraceContext(VALID)
    assert outgoing() is None
