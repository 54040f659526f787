from __future__ import annotations

import gc
import logging
from pathlib import Path

import pytest

from agent_server import events
from agent_server.agent import prompts
from agent_server.agent.prompts import (
    DEFAULT_PROMPT,
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    PromptPart,
    build_prompt_parts,
    estimate_message_tokens,
    estimate_tokens,
    estimate_tool_tokens,
    render_system_prompt,
    trace_parts,
)
from agent_server.types import ImagePart, Message, TextPart, ToolCall, ToolSpec


def write_prompt(workspace: Path, name: str, body: str | bytes) -> Path:
    directory = workspace / ".agent_server" / "prompts"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    if isinstance(body, bytes):
        path.write_bytes(body)
    else:
        path.write_text(body, encoding="utf-8")
    return path


@pytest.mark.parametrize(("text", "tokens"), [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("x" * 400, 100)])
def test_estimate_tokens_is_a_quarter_of_the_characters_rounded_up(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


def test_estimate_message_tokens_counts_text_tool_calls_images_and_overhead() -> None:
    plain = Message(role="user", content="x" * 40)
    assert estimate_message_tokens([plain]) == MESSAGE_OVERHEAD_TOKENS + 10

    with_call = Message(role="assistant", tool_calls=[ToolCall(id="c", name="read_file", arguments={"path": "a"})])
    assert estimate_message_tokens([with_call]) > MESSAGE_OVERHEAD_TOKENS

    with_image = Message(
        role="user", content=[TextPart(text="look"), ImagePart(data="A" * 10_000, mime_type="image/png")]
    )
    assert estimate_message_tokens([with_image]) == MESSAGE_OVERHEAD_TOKENS + 1 + IMAGE_TOKENS

    assert estimate_message_tokens([plain, with_image]) == estimate_message_tokens([plain]) + estimate_message_tokens(
        [with_image]
    )
    assert estimate_message_tokens([]) == 0


def test_estimate_tool_tokens_grows_with_the_schemas() -> None:
    small = ToolSpec(name="a")
    big = ToolSpec(name="b", description="d" * 400)
    assert estimate_tool_tokens([]) == 0
    assert 0 < estimate_tool_tokens([small]) < estimate_tool_tokens([small, big])
    assert estimate_tool_tokens([big]) > 100


def test_parts_are_default_then_workspace_files_sorted_then_config(tmp_path: Path) -> None:
    write_prompt(tmp_path, "b_style.md", "Prefer short answers.\n")
    write_prompt(tmp_path, "a_project.md", "This repo is a compiler.")
    write_prompt(tmp_path, "notes.txt", "not a prompt")

    parts = build_prompt_parts(tmp_path, "  Always answer in French.  ")

    assert [p.id for p in parts] == ["default", "workspace:a_project.md", "workspace:b_style.md", "config"]
    assert parts[0].body == DEFAULT_PROMPT
    assert parts[1] == PromptPart(
        id="workspace:a_project.md",
        title="a_project",
        source=".agent_server/prompts/a_project.md",
        body="This repo is a compiler.",
    )
    assert parts[2].body == "Prefer short answers."
    assert parts[3].body == "Always answer in French."
    assert parts[3].source == "settings"


def test_parts_without_workspace_prompts_or_config_are_just_the_default(tmp_path: Path) -> None:
    assert [p.id for p in build_prompt_parts(tmp_path, None)] == ["default"]
    assert [p.id for p in build_prompt_parts(tmp_path, "   ")] == ["default"]


def test_undecodable_prompt_file_is_skipped_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_prompt(tmp_path, "bad.md", b"\xff\xfe\x00not utf-8 \xc3")
    write_prompt(tmp_path, "good.md", "fine")
    write_prompt(tmp_path, "empty.md", "  \n")

    with caplog.at_level(logging.WARNING, logger="agent_server.agent.prompts"):
        parts = build_prompt_parts(tmp_path, None)

    assert [p.id for p in parts] == ["default", "workspace:good.md"]
    assert any("bad.md" in record.getMessage() for record in caplog.records)


def test_a_directory_named_like_a_prompt_is_ignored(tmp_path: Path) -> None:
    (tmp_path / ".agent_server" / "prompts" / "dir.md").mkdir(parents=True)
    assert [p.id for p in build_prompt_parts(tmp_path, None)] == ["default"]


def test_render_joins_titled_sections() -> None:
    parts = [
        PromptPart(id="default", title="Agent", source="builtin", body="Be good."),
        PromptPart(id="config", title="Configured instructions", source="settings", body="Be brief."),
    ]
    assert render_system_prompt(parts) == "## Agent\nBe good.\n\n## Configured instructions\nBe brief."


def test_trace_parts_carry_ids_sources_and_estimated_tokens(tmp_path: Path) -> None:
    write_prompt(tmp_path, "style.md", "x" * 400)
    parts = build_prompt_parts(tmp_path, "y" * 40)

    traced = trace_parts(parts)

    assert all(isinstance(t, events.PromptPart) for t in traced)
    assert [(t.id, t.source) for t in traced] == [
        ("default", "builtin"),
        ("workspace:style.md", ".agent_server/prompts/style.md"),
        ("config", "settings"),
    ]
    assert traced[1].tokens >= 100
    assert traced[2].tokens >= 10
    # The traced parts account for the whole system prompt, separators aside.
    assert abs(sum(t.tokens for t in traced) - estimate_tokens(render_system_prompt(parts))) <= len(parts)


def test_instructions_and_skills_come_after_the_default_and_before_the_prompt_files(tmp_path: Path) -> None:
    from agent_server.types import InstructionFile, InstructionText, ProjectGuidance, SkillInfo

    write_prompt(tmp_path, "style.md", "Be terse.")
    used = InstructionFile(path="AGENTS.md", applies_to=".", size=6, included_bytes=6)
    guidance = ProjectGuidance(
        instructions=InstructionText(file=used, text="Rules."),
        skills=[SkillInfo(name="pdf", description="PDF forms.", path=".agents/skills/pdf/SKILL.md")],
        unlisted=3,
    )
    parts = build_prompt_parts(tmp_path, "Configured.", guidance)
    assert [part.id for part in parts] == ["default", "instructions", "skills", "workspace:style.md", "config"]
    assert parts[1].source == "AGENTS.md" and parts[1].body.endswith("\n\nRules.")
    assert "- pdf: PDF forms." in parts[2].body and "[3 more skill folder(s) were not looked at" in parts[2].body
    assert [part.id for part in build_prompt_parts(None, None, ProjectGuidance())] == ["default"]


def test_a_messages_estimate_is_made_once_and_goes_with_the_message(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = [ToolCall(id="c1", name="list_dir", arguments={"path": "."})]
    messages = [Message(role="assistant", content="", tool_calls=calls), Message(role="user", content="x" * 40)]
    first = prompts.estimate_message_tokens(messages)
    made: list[int] = []
    real = prompts.estimate_call_tokens

    def counted(calls: list[ToolCall]) -> int:
        made.append(1)
        return real(calls)

    monkeypatch.setattr(prompts, "estimate_call_tokens", counted)
    assert prompts.estimate_message_tokens(messages) == first  # remembered: no second walk of the calls
    assert made == []
    second = prompts.estimate_message_tokens(messages[1:])
    assert prompts.estimate_message_tokens([messages[0].model_copy()]) == first - second
    assert made == [1]  # a copy is a new object: estimated again
    kept = len(prompts._MESSAGE_TOKENS)  # pyright: ignore[reportPrivateUsage]
    del messages
    gc.collect()
    assert len(prompts._MESSAGE_TOKENS) <= kept - 2  # pyright: ignore[reportPrivateUsage]
