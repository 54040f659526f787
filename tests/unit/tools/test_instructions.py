"""Project instruction files: the first of the names a directory has, read bounded (cut with a note, never
half a character), passed over when binary, empty or leading outside the workspace; a subdirectory's files
found outermost first."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_server.errors import ConfigError
from agent_server.settings import Settings, load_settings
from agent_server.tools.instructions import instructions_in, nested_instructions

NAMES = ("AGENTS.md", "CLAUDE.md")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace.resolve()


def test_agents_md_wins_and_claude_md_is_the_fallback(root: Path) -> None:
    (root / "CLAUDE.md").write_text("claude\n")
    found = instructions_in(root, root, NAMES, 1024)
    assert found is not None and found.text == "claude" and found.file.path == "CLAUDE.md"
    (root / "AGENTS.md").write_text("agents\n")
    found = instructions_in(root, root, NAMES, 1024)
    assert found is not None and found.text == "agents" and found.file.size == 7


def test_a_cut_never_splits_a_character(root: Path) -> None:
    (root / "AGENTS.md").write_text("é" * 600)  # 1200 bytes, two each
    found = instructions_in(root, root, NAMES, 1023)
    assert found is not None and found.file.truncated and found.file.included_bytes == 1023
    kept = found.text.split("\n\n[")[0]
    assert kept == "é" * 511
    assert "[AGENTS.md is cut here: it is 1200 bytes, over the limit of 1023 bytes" in found.text


def test_binary_empty_and_outside_files_are_passed_over(root: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere.md").write_text("SECRET\n")
    os.symlink(tmp_path / "elsewhere.md", root / "AGENTS.md")
    (root / "CLAUDE.md").write_text("fallback\n")
    found = instructions_in(root, root, NAMES, 1024)
    assert found is not None and found.file.path == "CLAUDE.md"
    (root / "CLAUDE.md").write_bytes(b"a\x00b")
    assert instructions_in(root, root, NAMES, 1024) is None
    (root / "CLAUDE.md").write_text("  \n")
    assert instructions_in(root, root, NAMES, 1024) is None


def test_nested_files_come_outermost_first_and_skip_what_was_given(root: Path) -> None:
    (root / "AGENTS.md").write_text("root\n")
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "a" / "AGENTS.md").write_text("in a\n")
    (root / "a" / "b" / "c" / "CLAUDE.md").write_text("in c\n")
    (root / "a" / "b" / "c" / "file.py").write_text("x\n")
    found = nested_instructions(root, root / "a" / "b" / "c" / "file.py", NAMES, 1024)
    assert [(t.file.path, t.file.applies_to, t.text) for t in found] == [
        ("a/AGENTS.md", "a", "in a"),
        ("a/b/c/CLAUDE.md", "a/b/c", "in c"),
    ]
    again = nested_instructions(root, root / "a" / "b" / "c", NAMES, 1024, skip=frozenset({"a"}))
    assert [t.file.path for t in again] == ["a/b/c/CLAUDE.md"]
    assert nested_instructions(root, root / "top.py", NAMES, 1024) == []


def test_instruction_file_names_are_names(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not a file name"):
        Settings(workspace=tmp_path, instruction_files=("docs/AGENTS.md",))


def test_skills_dirs_in_a_config_file_are_relative_to_it(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    config = tmp_path / "conf" / "agent.json"
    config.write_text('{"workspace": "..", "skills_dirs": ["skills"]}')
    settings = load_settings(config_file=config)
    assert settings.skills_dirs == ((tmp_path / "conf" / "skills").resolve(),)
    config.write_text('{"skills_max": -1}')
    with pytest.raises(ConfigError, match="skills_max"):
        load_settings(config_file=config)
