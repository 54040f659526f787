"""When tracing is on (settings, `OTEL_*`), and what content a span may say (redacted, cut)."""

from __future__ import annotations

from pathlib import Path

import pytest

import agent_server.tracing as tracing
from agent_server.errors import ConfigError
from agent_server.settings import Settings
from agent_server.tracing.content import Content, environment_secrets
from agent_server.types import Message, TextPart, ToolCall, ToolResult


def settings(tmp_path: Path, **overrides: object) -> Settings:
    return Settings(workspace=tmp_path, state_dir=tmp_path / "state", **overrides)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("environ", "on"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "x"}, False),  # a name alone configures no exporter
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False),
    ],
)
def test_the_environment_turns_tracing_on_only_with_an_exporter(
    tmp_path: Path, environ: dict[str, str], on: bool
) -> None:
    pytest.importorskip("opentelemetry.sdk")
    assert tracing.tracing_on(settings(tmp_path), environ) is on


def test_the_setting_decides_over_the_environment(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.sdk")
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}
    assert tracing.tracing_on(settings(tmp_path, tracing=False), endpoint) is False
    assert tracing.tracing_on(settings(tmp_path, tracing=True), {}) is True
    assert settings(tmp_path, tracing=True).tracing.enabled is True  # `tracing: true` is the short form


def test_without_the_extra_a_setting_is_an_error_and_the_environment_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(tracing, "sdk_installed", lambda: False)
    with pytest.raises(ConfigError, match=r"agent-server\[otel\]"):
        tracing.tracing_on(settings(tmp_path, tracing=True), {})
    assert tracing.tracing_on(settings(tmp_path), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}) is False
    assert "not installed" in caplog.text


def test_content_is_redacted_before_it_is_cut_and_says_how_much_was_cut() -> None:
    secret = "tok-0123456789-secret"
    content = Content([secret], max_chars=30)
    assert content.text(f"a {secret} b") == "a *** b"
    cut = content.text("x" * 25 + secret + "y" * 100)
    assert secret not in cut and cut.startswith("x" * 25) and cut.endswith("chars cut]")
    assert "tok-0123456789" not in content.text("x" * 20 + secret)  # a secret across the cut is masked whole


def test_messages_keep_the_newest_within_the_budget() -> None:
    content = Content([], max_chars=12)
    messages = [
        Message(role="user", content="old " * 50),
        Message(role="assistant", content="", tool_calls=[ToolCall(id="c1", name="t", arguments={"a": 1})]),
        Message(role="tool", tool_call_id="c1", content="result"),
    ]
    recorded = content.messages(messages)
    assert '"result"' in recorded and '"tool_call"' in recorded and "old old old" not in recorded
    result = ToolResult(call_id="c1", name="t", content=[TextPart(text="")], structured={"k": "v"})
    assert content.result(result) == '{"k": "v"}'


def test_secret_looking_environment_values_are_secrets() -> None:
    found = environment_secrets({"OPENAI_API_KEY": "sk-abcdefgh", "GITHUB_TOKEN": "short", "PATH": "/usr/bin:/bin"})
    assert found == ("sk-abcdefgh",)


def test_names_and_ids_the_model_chose_are_cut_on_spans() -> None:
    from agent_server.tracing.spans import MAX_NAME_CHARS, OtelTelemetry
    from tests.span_capture import capture

    with capture() as spans:
        telemetry = OtelTelemetry(spans.tracer("unit"), content=None, provider=None)
        with telemetry.tool(ToolCall(id="i" * 10_000, name="n" * 10_000)) as traced:
            traced.ended(ToolResult(call_id="i", name="n", is_error=True))
        (span,) = spans.all()
    attributes = dict(span.attributes or {})
    assert len(span.name) < MAX_NAME_CHARS + 20 and len(str(attributes["gen_ai.tool.call.id"])) < MAX_NAME_CHARS + 5
    assert span.status.status_code.name == "ERROR" and attributes["error.type"] == "tool_error"
