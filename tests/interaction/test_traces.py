"""OpenTelemetry traces through the MCP front door (README "Traces"), captured with the SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import Context, MCPServer
from opentelemetry import trace  # noqa: I001  (after span_capture, which skips without the extra)

from tests.interaction.harness import MODES, connect, make_settings
from tests.span_capture import Spans, capture, hex_ids

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("mode", MODES)]

KEYS = ("gen_ai.", "error.type", "agent_server.approval.")


@pytest.fixture
def spans() -> Iterator[Spans]:
    with capture() as captured:
        yield captured


def traceparent_of(span: trace.Span) -> Any:
    """The caller's `_meta`: its span's context, as a caller sends it (SEP-414)."""
    context = span.get_span_context()
    return {"traceparent": f"00-{trace.format_trace_id(context.trace_id)}-{trace.format_span_id(context.span_id)}-01"}


def probe_server(seen: list[dict[str, Any]]) -> MCPServer:
    """A mounted server whose `probe` tool keeps the `_meta` each call brings."""
    server = MCPServer("probe", log_level="WARNING")

    @server.tool(description="Remember this call's _meta")
    async def probe(text: str, ctx: Context) -> str:
        seen.append(dict(ctx.request_context.meta or {}))
        return f"probed {text}"

    @server.tool(description="Always fails")
    async def broken() -> str:
        raise ValueError("broken on purpose")

    return server


def _settings(tmp_path: Path, **overrides: Any) -> Any:
    overrides.setdefault("approvals", {"default": "allow"})
    overrides.setdefault("tracing", True)
    return make_settings(tmp_path, mcpServers={"mnt": {"command": "unused"}}, **overrides)


TOOL_ROUND = [
    {"tool_calls": [{"name": "mnt__probe", "arguments": {"text": "hi"}}], "usage": {"prompt_tokens": 11}},
    {"content": "done", "usage": {"prompt_tokens": 20, "completion_tokens": 3}},
]


async def test_a_turn_with_a_mounted_tool_round_is_one_tree_under_the_caller(
    tmp_path: Path, mode: str, spans: Spans
) -> None:
    seen: list[dict[str, Any]] = []
    mounts = {"mnt": probe_server(seen)}
    caller = spans.tracer("test-caller")
    async with connect(tmp_path, TOOL_ROUND, mode=mode, settings=_settings(tmp_path), in_process_mounts=mounts) as h:
        with caller.start_as_current_span("caller") as span:
            result = await h.call("run_turn", {"prompt": "probe it"}, meta=traceparent_of(span))
            caller_trace = trace.format_trace_id(span.get_span_context().trace_id)
    record = result.structured_content
    assert record["status"] == "completed", record

    turn = spans.one("invoke_agent")
    tree = "\n".join(spans.tree(turn, KEYS))
    assert [s.name for s in spans.children(turn)] == ["chat", "execute_tool mnt__probe", "chat"], tree
    assert hex_ids(turn)[0] == caller_trace == record["trace_id"]  # the record finds its trace
    assert spans.parent(turn) is spans.one("caller"), tree  # through `_meta` (the MCP SDK extracts it)

    attributes = dict(turn.attributes or {})
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.conversation.id"] == record["session_id"]
    assert attributes["gen_ai.usage.input_tokens"] == 31 and attributes["gen_ai.usage.output_tokens"] == 3
    first_chat = spans.children(turn)[0]
    assert dict(first_chat.attributes or {})["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert dict(first_chat.attributes or {})["gen_ai.provider.name"] == "script"
    tool = spans.one("execute_tool mnt__probe")
    tool_attributes = dict(tool.attributes or {})
    assert tool_attributes["gen_ai.tool.name"] == "mnt__probe"
    assert tool_attributes["gen_ai.tool.call.id"] == "call_1"
    assert tool.status.status_code.name == "UNSET"

    # The mounted server got the tool call's context in its `_meta`.
    assert len(seen) == 1
    _version, trace_id, parent_id, _flags = seen[0]["traceparent"].split("-")
    assert (trace_id, parent_id) == hex_ids(tool), tree


async def test_failures_set_error_type_and_status(tmp_path: Path, mode: str, spans: Spans) -> None:
    script = [
        {"tool_calls": [{"name": "mnt__broken", "arguments": {}}]},
        {"error": {"message": "provider down"}},
    ]
    mounts = {"mnt": probe_server([])}
    async with connect(tmp_path, script, mode=mode, settings=_settings(tmp_path), in_process_mounts=mounts) as h:
        result = await h.call("run_turn", {"prompt": "break"})
    record = result.structured_content
    assert record["status"] == "failed"

    tool = spans.one("execute_tool mnt__broken")
    assert tool.status.status_code.name == "ERROR" and dict(tool.attributes or {})["error.type"] == "tool_error"
    failed_chat = spans.named("chat")[-1]
    assert failed_chat.status.status_code.name == "ERROR"
    assert dict(failed_chat.attributes or {})["error.type"] == record["error"]["type"]
    turn = spans.one("invoke_agent")
    assert turn.status.status_code.name == "ERROR"
    assert dict(turn.attributes or {})["error.type"] == record["error"]["type"]
    assert dict(turn.attributes or {})["agent_server.turn.status"] == "failed"


async def test_prompts_and_results_are_recorded_only_when_opted_in(tmp_path: Path, mode: str, spans: Spans) -> None:
    secret = "sk-test-0123456789abcdef"
    mounts = {"mnt": probe_server([])}
    prompt = f"use key {secret} " + "x" * 5000

    async def run(settings: Any) -> None:
        async with connect(tmp_path, TOOL_ROUND, mode=mode, settings=settings, in_process_mounts=mounts) as h:
            assert (await h.call("run_turn", {"prompt": prompt})).structured_content["status"] == "completed"

    await run(_settings(tmp_path))
    content_keys = {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments"}
    assert not {key for s in spans.all() for key in (s.attributes or {})} & content_keys
    spans.exporter.clear()

    opted = _settings(tmp_path, tracing={"enabled": True, "content": True, "content_max_chars": 200})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PROBE_API_KEY", secret)  # a secret-looking variable: its value is masked wherever it shows
        await run(opted)
    turn = dict(spans.one("invoke_agent").attributes or {})
    recorded = str(turn["gen_ai.input.messages"])
    assert secret not in recorded and "***" in recorded and "chars cut]" in recorded
    assert len(recorded) < 400  # cut to content_max_chars (plus the JSON around it)
    assert "done" in str(turn["gen_ai.output.messages"])
    tool = dict(spans.one("execute_tool").attributes or {})
    assert tool["gen_ai.tool.call.arguments"] == '{"text": "hi"}' and tool["gen_ai.tool.call.result"] == "probed hi"
    assert all(secret not in str(v) for s in spans.all() for v in (s.attributes or {}).values())


async def test_an_approval_is_a_span_under_its_tool_call(tmp_path: Path, mode: str, spans: Spans) -> None:
    if mode == "auto":
        pytest.skip("the elicitation channel is the handshake era's (2026-07-28 asks through rounds)")

    async def allow(context: Any, params: Any) -> Any:
        import mcp_types as types

        return types.ElicitResult(action="accept", content={"decision": "allow_once"})

    script = TOOL_ROUND
    settings = _settings(tmp_path, approvals={"default": "ask"})
    mounts = {"mnt": probe_server([])}
    async with connect(
        tmp_path, script, mode=mode, settings=settings, in_process_mounts=mounts, elicitation_callback=allow
    ) as h:
        record = (await h.call("run_turn", {"prompt": "ask first", "detail": "full"})).structured_content
    assert record["approvals"][0]["decision"] == "allow_once", record
    approval = spans.one("approval mnt__probe")
    attributes = dict(approval.attributes or {})
    assert attributes["agent_server.approval.decision"] == "allow_once"
    assert attributes["agent_server.approval.channel"] == record["approvals"][0]["channel"]
    assert attributes["agent_server.approval.latency_s"] == pytest.approx(record["approvals"][0]["latency_s"])
    assert spans.parent(approval) is spans.one("execute_tool mnt__probe")


async def test_compaction_is_a_span_with_its_model_call_inside(tmp_path: Path, mode: str, spans: Spans) -> None:
    script = [{"content": "one"}, {"content": "two"}, {"content": "SUMMARY"}]
    async with connect(tmp_path, script, mode=mode, settings=make_settings(tmp_path, tracing=True)) as h:
        first = (await h.call("run_turn", {"prompt": "a", "session_id": "new"})).structured_content
        await h.call("run_turn", {"prompt": "b", "session_id": first["session_id"]})
        compacted = (await h.call("compact", {"session_id": first["session_id"], "keep_last": 1})).structured_content
    assert compacted["mode"] == "llm", compacted
    span = spans.one("compact_history")
    attributes = dict(span.attributes or {})
    assert attributes["agent_server.compaction.reason"] == "manual"
    assert attributes["agent_server.compaction.compacted_messages"] == compacted["compacted_message_count"]
    inner = spans.children(span)
    assert [s.name for s in inner] == ["chat"]
    assert dict(inner[0].attributes or {})["agent_server.request.purpose"] != "turn"


async def test_a_background_turn_keeps_one_trace_id_in_record_and_span(tmp_path: Path, mode: str, spans: Spans) -> None:
    async with connect(
        tmp_path, [{"content": "later"}], mode=mode, settings=make_settings(tmp_path, tracing=True)
    ) as h:
        started = (await h.call("run_turn", {"prompt": "bg", "background": True})).structured_content
        ended = (await h.call("turn_wait", {"turn_id": started["turn_id"], "timeout_s": 5})).structured_content
    assert ended["status"] == "completed"
    turn = spans.one("invoke_agent")
    assert hex_ids(turn)[0] == started["trace_id"] == ended["trace_id"]
    assert dict(turn.attributes or {})["agent_server.turn.id"] == started["turn_id"]


async def test_without_tracing_the_server_makes_no_spans_of_its_own(tmp_path: Path, mode: str, spans: Spans) -> None:
    """Off, the server makes no span; the record takes the caller's trace id (its `traceparent`), as it did before
    tracing existed."""
    caller = spans.tracer("test-caller")
    async with connect(tmp_path, [{"content": "quiet"}], mode=mode, settings=make_settings(tmp_path)) as h:
        with caller.start_as_current_span("caller") as span:
            record = (await h.call("run_turn", {"prompt": "x"}, meta=traceparent_of(span))).structured_content
    assert [s.name for s in spans.all()] == ["caller"]
    assert record["trace_id"] == trace.format_trace_id(span.get_span_context().trace_id)
