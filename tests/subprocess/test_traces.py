"""Traces across the process boundary (README "Traces").

On: a real `agent-server` exports over OTLP/HTTP to a receiver in the test, configured only by the standard
`OTEL_*` variables; the caller's `traceparent` arrives over stdio in `_meta`, and a mounted stdio server gets
the tool call's context in its own `_meta` (a few seconds: a server process, its mounted server, the export).
Off: a server spawned with the extra installed but no `OTEL_*` variables never imports OpenTelemetry's SDK.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.subprocess.helpers import REPO, ServerDirs, server_env

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

pytestmark = pytest.mark.anyio

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


class Receiver(BaseHTTPRequestHandler):
    """`POST /v1/traces` with an OTLP protobuf body: each request is decoded and kept."""

    received: list[ExportTraceServiceRequest]
    arrived: threading.Event

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
            self.send_response(404)
            self.end_headers()
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        type(self).received.append(request)
        type(self).arrived.set()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def receiver() -> Iterator[tuple[str, type[Receiver]]]:
    pytest.importorskip("opentelemetry.sdk", reason="needs the otel extra: pip install 'agent-server[otel]'")
    handler = type("TestReceiver", (Receiver,), {"received": [], "arrived": threading.Event()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def _spans(requests: list[ExportTraceServiceRequest]) -> tuple[list[Any], list[dict[str, Any]]]:
    spans: list[Any] = []
    resources: list[dict[str, Any]] = []
    for request in requests:
        for resource_spans in request.resource_spans:
            resources.append({a.key: a.value.string_value for a in resource_spans.resource.attributes})
            for scope in resource_spans.scope_spans:
                spans.extend(scope.spans)
    return spans, resources


def _attributes(span: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for attribute in span.attributes:
        kind = attribute.value.WhichOneof("value")
        values[attribute.key] = getattr(attribute.value, kind) if kind else None
    return values


async def test_a_turn_is_exported_over_otlp_under_the_callers_traceparent(
    dirs: ServerDirs, receiver: tuple[str, type[Receiver]]
) -> None:
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    endpoint, handler = receiver
    echo = [str(REPO / "tests" / "fakes" / "mcp_trace_meta.py")]
    config = {"approvals": {"default": "allow"}, "mcpServers": {"echo": {"command": sys.executable, "args": echo}}}
    (dirs.root / "config.json").write_text(json.dumps(config))
    script = [{"tool_calls": [{"name": "echo__trace_meta", "arguments": {}}]}, {"content": "traced"}]
    command, *args = [*dirs.argv(script), "--config", str(dirs.root / "config.json")]
    env = server_env() | {
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_SERVICE_NAME": "agent-server-under-test",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }
    params = StdioServerParameters(command=command, args=args, env=env, cwd=str(dirs.root))
    parent = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
    # The caller's span is current too, so that this process's own MCP SDK, should a tracer provider be installed
    # here, replaces the `traceparent` by its child span's in the same trace (it writes the current context).
    caller = SpanContext(int(CALLER_TRACE, 16), int(CALLER_SPAN, 16), is_remote=True, trace_flags=TraceFlags(1))
    with anyio.fail_after(30), trace.use_span(NonRecordingSpan(caller)):
        async with Client(params, mode="legacy") as client:
            result = await client.call_tool(
                "run_turn", {"prompt": "trace me", "detail": "full"}, meta={"traceparent": parent}
            )
        # The server flushes its spans as it exits (stdin closed): they are there once it has gone.
        while not any(s.name.startswith("invoke_agent") for s in _spans(handler.received)[0]):
            await anyio.to_thread.run_sync(handler.arrived.wait, 1.0)
            handler.arrived.clear()
    record = result.structured_content
    assert record is not None and record["status"] == "completed", record
    assert record["trace_id"] == CALLER_TRACE

    spans, resources = _spans(handler.received)
    assert {r.get("service.name") for r in resources} == {"agent-server-under-test"}
    by_id = {s.span_id.hex(): s for s in spans}
    turn = next(s for s in spans if s.name == "invoke_agent agent-server")
    assert turn.trace_id.hex() == CALLER_TRACE
    server_span = by_id[turn.parent_span_id.hex()]  # the MCP SDK's span of this request, parented by the caller
    assert server_span.name == "tools/call run_turn" and server_span.trace_id.hex() == CALLER_TRACE
    tool = next(s for s in spans if s.name == "execute_tool echo__trace_meta")
    assert tool.parent_span_id == turn.span_id
    assert _attributes(tool)["gen_ai.tool.call.id"] == "call_1"

    # The mounted stdio server received this trace in `_meta`, from the MCP SDK's span of the call below the tool's.
    text = record["tool_rounds"][0]["tool_results"][0]["content"][0]["text"]
    received = json.loads(text)["traceparent"].split("-")
    assert received[1] == CALLER_TRACE
    sent = by_id[received[2]]
    assert sent.parent_span_id == tool.span_id and sent.name.startswith("MCP send tools/call")


_MODULES_AT_EXIT = """
import atexit, json, sys
def dump():
    heavy = ("opentelemetry.sdk", "opentelemetry.exporter", "opentelemetry.proto", "google.protobuf", "requests")
    found = sorted(m for m in sys.modules if m.split(".")[0] == "requests" or m.startswith(heavy[:4])
                   or m.startswith("agent_server.tracing."))
    open(OUT, "w").write(json.dumps(found))
OUT = sys.argv.pop(1)
atexit.register(dump)
from agent_server.cli import main
main()
"""


async def test_a_server_without_otel_variables_imports_nothing_of_opentelemetrys_sdk(dirs: ServerDirs) -> None:
    """Spawn, `tools/list`, a turn with a tool call, exit: the SDK, its exporter and protobuf are never loaded,
    nor this package's tracing modules, although the extra is installed (the MCP SDK imports the API itself)."""
    out = dirs.root / "modules.json"
    script = [{"tool_calls": [{"name": "list_dir", "arguments": {}}]}, {"content": "untraced"}]
    _python, _dash_m, _module, *flags = dirs.argv(script)
    env = {k: v for k, v in server_env().items() if not k.startswith("OTEL_")}
    params = StdioServerParameters(
        command=sys.executable, args=["-c", _MODULES_AT_EXIT, str(out), *flags], env=env, cwd=str(dirs.root)
    )
    with anyio.fail_after(30):
        async with Client(params, mode="auto") as client:
            assert "run_turn" in {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool("run_turn", {"prompt": "look"})
    assert result.structured_content is not None and result.structured_content["status"] == "completed"
    assert json.loads(out.read_text()) == []  # written as the process exited, which the client waited for
