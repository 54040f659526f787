"""Project instructions and Agent Skills end to end, as the model sees them: the workspace's AGENTS.md in the
system prompt (not CLAUDE.md beside it), a subdirectory's AGENTS.md with the first tool result under it, the
skills listed by name and description only (an invalid one left out, with its reason in `agent_tools`), a
skill's body only once `load_skill` returned it, a library skill's files readable outside the workspace and
nothing else there; the system prompt the same in every round of the turn."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_server.llm.base import ModelRequest
from agent_server.tools.builtin import INLINE_READ_BYTES
from tests.interaction.harness import MODES, connect, make_settings

pytestmark = pytest.mark.anyio

ROOT_RULE = "Run `make check` before you say you are done (ROOT-RULE-7f3)."
NESTED_RULE = "In pkg, indent with tabs (NESTED-RULE-91c)."
SKILL_BODY = "Fill the form field by field (PDF-BODY-c55); run scripts/fill.py for the checkboxes."
LIBRARY_BODY = "Write release notes from the git log (NOTES-BODY-2d8)."
PDF_DESCRIPTION = "Fill in PDF forms. Use when the user asks to complete a PDF form."


def _skill(folder: Path, front_matter: str, body: str, files: dict[str, str] | None = None) -> None:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\n{front_matter}\n---\n\n{body}\n")
    for rel, text in (files or {}).items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _workspace(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace with AGENTS.md (and a CLAUDE.md that must not be used), pkg/AGENTS.md, a valid and an invalid
    skill; and a skill library outside it. Returns (workspace, library)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text(f"# Rules\n{ROOT_RULE}\n")
    (workspace / "CLAUDE.md").write_text("CLAUDE-ONLY-0aa\n")
    (workspace / "pkg").mkdir()
    (workspace / "pkg" / "AGENTS.md").write_text(NESTED_RULE + "\n")
    (workspace / "pkg" / "code.py").write_text("x = 1\n")
    skills = workspace / ".agents" / "skills"
    _skill(
        skills / "pdf-fill",
        f"name: pdf-fill\ndescription: >\n  {PDF_DESCRIPTION}\nmetadata:\n  version: '1.0'",
        SKILL_BODY,
        {"scripts/fill.py": "print('filled')\n", "reference.md": "# Fields\n"},
    )
    _skill(skills / "Bad_Skill", "name: Bad_Skill\ndescription: uppercase and underscore", "BAD-BODY-e01")
    library = tmp_path / "library"
    _skill(
        library / "release-notes",
        "name: release-notes\ndescription: 'Draft release notes: use before a release.'",
        LIBRARY_BODY,
        {"template.md": "TEMPLATE-TEXT-4b1\n"},
    )
    (library / "secret.txt").write_text("LIBRARY-ROOT-SECRET\n")
    (tmp_path / "outside.txt").write_text("OUTSIDE-SECRET\n")
    os.symlink(tmp_path / "outside.txt", library / "release-notes" / "leak.txt")
    return workspace, library


def _system(request: ModelRequest) -> str:
    first = request.messages[0]
    assert first.role == "system"
    return first.text()


def _tool_texts(request: ModelRequest) -> list[str]:
    return [message.text() for message in request.messages if message.role == "tool"]


@pytest.mark.parametrize("mode", MODES)
async def test_the_model_gets_the_instructions_and_a_skill_only_once_loaded(tmp_path: Path, mode: str) -> None:
    workspace, library = _workspace(tmp_path)
    template = library / "release-notes" / "template.md"
    script: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "load_skill", "arguments": {"name": "pdf-fill"}}]},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "pkg/code.py"}}]},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "pkg/code.py"}}]},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": str(template)}}]},
        {"content": "done"},
    ]
    settings = make_settings(tmp_path, skills_dirs=(library,))
    assert settings.workspace == workspace.resolve()
    async with connect(tmp_path, script, mode=mode, settings=settings) as h:
        with anyio.fail_after(10):
            result = await h.call("run_turn", {"prompt": "fill the form", "detail": "full"})
            tools = (await h.call("agent_tools")).structured_content
    record = result.structured_content
    assert record["status"] == "completed", record
    calls = list(h.llm.calls)
    system = _system(calls[0])
    assert ROOT_RULE in system and "CLAUDE-ONLY" not in system
    assert f"- pdf-fill: {PDF_DESCRIPTION}" in system
    assert "- release-notes: Draft release notes: use before a release." in system
    assert "PDF-BODY" not in system and "Bad_Skill" not in system and "BAD-BODY" not in system
    assert "NESTED-RULE" not in system
    assert {_system(call) for call in calls} == {system}, "the system prompt changed between rounds"
    assert not any("PDF-BODY" in text for text in _tool_texts(calls[0]))

    loaded = _tool_texts(calls[1])[-1]
    assert SKILL_BODY in loaded and "name: pdf-fill" not in loaded
    assert ".agents/skills/pdf-fill/scripts/fill.py" in loaded and ".agents/skills/pdf-fill/reference.md" in loaded
    first_read, second_read = _tool_texts(calls[3])[-2:]
    assert NESTED_RULE in first_read and "from pkg/AGENTS.md" in first_read
    assert NESTED_RULE not in second_read, "a subdirectory's instructions are given once per turn"
    assert _tool_texts(calls[4])[-1] == "TEMPLATE-TEXT-4b1\n"

    assert [(f["path"], f["applies_to"], f["size"]) for f in record["instructions"]] == [
        ("AGENTS.md", ".", len(f"# Rules\n{ROOT_RULE}\n")),
        ("pkg/AGENTS.md", "pkg", len(NESTED_RULE) + 1),
    ]
    assert "load_skill" in {tool["name"] for tool in tools["tools"]}
    assert [(f["path"], f["truncated"]) for f in tools["instructions"]] == [("AGENTS.md", False)]
    assert [(s["name"], s["path"]) for s in tools["skills"]] == [
        ("pdf-fill", ".agents/skills/pdf-fill/SKILL.md"),
        ("release-notes", str(library / "release-notes" / "SKILL.md")),
    ]
    [skipped] = tools["skipped_skills"]
    assert skipped["path"] == ".agents/skills/Bad_Skill" and "breaks the rules" in skipped["reason"]


@pytest.mark.parametrize("mode", MODES)
async def test_only_a_skills_folder_is_readable_outside_the_workspace(tmp_path: Path, mode: str) -> None:
    workspace, library = _workspace(tmp_path)
    reads = [
        str(library / "secret.txt"),  # in the library, but in no skill's folder
        str(library / "release-notes" / "leak.txt"),  # in a skill's folder, leading out of it
        str(library / "release-notes" / ".." / "secret.txt"),
        str(tmp_path / "outside.txt"),
    ]
    script: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": path}} for path in reads]},
        {"content": "done"},
    ]
    settings = make_settings(tmp_path, skills_dirs=(library,))
    assert settings.workspace == workspace.resolve()
    async with connect(tmp_path, script, mode=mode, settings=settings) as h:
        with anyio.fail_after(10):
            result = await h.call("run_turn", {"prompt": "read", "detail": "full"})
    record = result.structured_content
    assert [line["is_error"] for line in record["tool_calls"]] == [True] * len(reads)
    texts = _tool_texts(h.llm.calls[-1])
    assert all("is outside the workspace" in text for text in texts), texts
    assert not any("SECRET" in text for text in texts)


@pytest.mark.parametrize("mode", MODES)
async def test_a_workspace_skill_leading_outside_it_is_skipped(tmp_path: Path, mode: str) -> None:
    settings = make_settings(tmp_path)
    elsewhere = tmp_path / "elsewhere" / "sneaky"
    _skill(elsewhere, "name: sneaky\ndescription: reads what it should not", "SNEAKY-BODY")
    skills = settings.workspace / ".claude" / "skills"
    skills.mkdir(parents=True)
    os.symlink(elsewhere, skills / "sneaky")
    script = [{"tool_calls": [{"name": "load_skill", "arguments": {"name": "sneaky"}}]}, {"content": "no"}]
    async with connect(tmp_path, script, mode=mode, settings=settings) as h:
        with anyio.fail_after(10):
            tools = (await h.call("agent_tools")).structured_content
            await h.call("run_turn", {"prompt": "use sneaky"})
    assert tools["skills"] == []
    [skipped] = tools["skipped_skills"]
    assert skipped["path"] == ".claude/skills/sneaky" and "outside the workspace" in skipped["reason"]
    system = _system(h.llm.calls[0])
    assert "sneaky" not in system and "## Skills" not in system
    [answer] = _tool_texts(h.llm.calls[1])
    assert "no skill named 'sneaky'" in answer and "SNEAKY-BODY" not in answer


@pytest.mark.parametrize("mode", MODES)
async def test_without_instructions_or_skills_nothing_changes(tmp_path: Path, mode: str) -> None:
    async with connect(tmp_path, [{"content": "hi"}], mode=mode) as h:
        with anyio.fail_after(10):
            tools = (await h.call("agent_tools")).structured_content
            result = await h.call("run_turn", {"prompt": "hello", "detail": "full"})
    assert "load_skill" not in {tool["name"] for tool in tools["tools"]}
    assert tools["instructions"] == [] and tools["skills"] == [] and tools["skipped_skills"] == []
    assert result.structured_content["instructions"] == []
    system = _system(h.llm.calls[0])
    assert "Project instructions" not in system and "## Skills" not in system


@pytest.mark.parametrize("mode", MODES)
async def test_claude_md_is_used_when_there_is_no_agents_md_and_a_huge_one_is_cut(tmp_path: Path, mode: str) -> None:
    settings = make_settings(tmp_path, instructions_max_bytes=1024)
    (settings.workspace / "CLAUDE.md").write_text("CLAUDE-RULE-5e0\n" + "x" * 100_000)
    async with connect(tmp_path, [{"content": "hi"}], mode=mode, settings=settings) as h:
        with anyio.fail_after(10):
            result = await h.call("run_turn", {"prompt": "hello", "detail": "full"})
    system = _system(h.llm.calls[0])
    assert "CLAUDE-RULE-5e0" in system
    assert "[CLAUDE.md is cut here: it is 100016 bytes, over the limit of 1024 bytes" in system
    assert len(system) < 4000
    [used] = result.structured_content["instructions"]
    assert used == {
        "path": "CLAUDE.md",
        "applies_to": ".",
        "size": 100_016,
        "included_bytes": 1024,
        "truncated": True,
    }


@pytest.mark.parametrize("mode", MODES)
async def test_the_system_prompt_is_the_same_next_turn_until_a_file_changes(tmp_path: Path, mode: str) -> None:
    workspace, library = _workspace(tmp_path)
    settings = make_settings(tmp_path, skills_dirs=(library,))
    script = [{"content": "one"}, {"content": "two"}, {"content": "three"}]
    async with connect(tmp_path, script, mode=mode, settings=settings) as h:
        with anyio.fail_after(10):
            await h.call("run_turn", {"prompt": "first"})
            await h.call("run_turn", {"prompt": "second"})
            (workspace / "AGENTS.md").write_text("CHANGED-RULE\n")
            await h.call("run_turn", {"prompt": "third"})
    first, second, third = (_system(call) for call in h.llm.calls)
    assert first == second
    assert "CHANGED-RULE" in third and ROOT_RULE not in third
    assert third.split("## Project instructions")[0] == first.split("## Project instructions")[0]


@pytest.mark.parametrize("mode", MODES)
async def test_a_turn_gets_at_most_sixteen_nested_files_and_none_when_the_list_is_empty(
    tmp_path: Path, mode: str
) -> None:
    settings = make_settings(tmp_path)
    deep = settings.workspace
    for depth in range(20):
        deep = deep / f"d{depth}"
        deep.mkdir()
        (deep / "AGENTS.md").write_text(f"LEVEL-{depth}\n")
    (deep / "f.txt").write_text("leaf\n")
    leaf = deep.relative_to(settings.workspace).as_posix() + "/f.txt"
    script = [{"tool_calls": [{"name": "read_file", "arguments": {"path": leaf}}]}, {"content": "ok"}]
    async with connect(tmp_path, script, mode=mode, settings=settings) as h:
        with anyio.fail_after(10):
            record = (await h.call("run_turn", {"prompt": "read", "detail": "full"})).structured_content
    assert [f["applies_to"].count("/") for f in record["instructions"]] == list(range(16))
    [read] = _tool_texts(h.llm.calls[1])
    assert "LEVEL-0" in read and "LEVEL-15" in read and "LEVEL-16" not in read

    (tmp_path / "off").mkdir()
    off = make_settings(tmp_path / "off", instruction_files=())
    (off.workspace / "AGENTS.md").write_text("IGNORED\n")
    async with connect(tmp_path / "off", [{"content": "ok"}], mode=mode, settings=off) as h:
        with anyio.fail_after(10):
            record = (await h.call("run_turn", {"prompt": "hi", "detail": "full"})).structured_content
    assert record["instructions"] == [] and "IGNORED" not in _system(h.llm.calls[0])


@pytest.mark.parametrize("mode", MODES)
async def test_provider_prompt_caching_holds_with_instructions_skills_and_a_nested_file(
    tmp_path: Path, mode: str
) -> None:
    from tests.fakes.anthropic_server import AnthropicModel, Say
    from tests.interaction.test_anthropic import ROUNDS, anthropic

    calls = [Say(calls=[(f"toolu_{i}", "read_file", {"path": f"pkg/part{i}.txt"})]) for i in range(ROUNDS - 1)]
    model = AnthropicModel(*calls, Say(text="All parts read."))
    async with anthropic(tmp_path, mode, model) as h:
        (h.workspace / "AGENTS.md").write_text(ROOT_RULE + "\n")
        _skill(h.workspace / ".agents" / "skills" / "pdf-fill", f"name: pdf-fill\ndescription: {PDF_DESCRIPTION}", "B")
        (h.workspace / "pkg").mkdir()
        (h.workspace / "pkg" / "AGENTS.md").write_text(NESTED_RULE + "\n")
        for i in range(ROUNDS - 1):
            (h.workspace / "pkg" / f"part{i}.txt").write_text(f"part {i}: " + "some text of this part. " * 12)
        record = await h.turn("Read every part, one at a time")
    assert record["status"] == "completed", record
    assert [f["path"] for f in record["instructions"]] == ["AGENTS.md", "pkg/AGENTS.md"]
    accounted = model.accounted
    assert all(round(usage.read_share, 3) >= 0.9 for usage in accounted[1:]), [u.read_share for u in accounted]
    assert [u.cache_read_input_tokens for u in accounted[1:]] == [u.total for u in accounted[:-1]]
    systems = {json.dumps(request.json["system"]) for request in h.server.requests}
    assert len(systems) == 1 and ROOT_RULE in systems.pop()


@pytest.mark.parametrize("mode", MODES)
async def test_a_subdirectorys_instructions_are_looked_up_in_the_tools_own_step(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At most one worker-thread hop per built-in call, the lookup of the instruction files under its path in it:
    none for a small file (read on the event loop), one for a file over `INLINE_READ_BYTES`."""
    _workspace(tmp_path)
    (tmp_path / "ws" / "pkg" / "big.txt").write_text("x" * INLINE_READ_BYTES + "\n")
    hops: list[str] = []
    shipped = anyio.to_thread.run_sync

    async def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(fn, "__qualname__", repr(fn)))
        return await shipped(fn, *args, **kwargs)

    small = {"tool_calls": [{"name": "read_file", "arguments": {"path": "pkg/code.py"}}]}
    big = {"tool_calls": [{"name": "read_file", "arguments": {"path": "pkg/big.txt"}}]}
    async with connect(tmp_path, [small, big, {"content": "done"}], mode=mode) as h:
        monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
        with anyio.fail_after(10):
            result = await h.call("run_turn", {"prompt": "read both", "detail": "full"})
    first, second = _tool_texts(h.llm.calls[2])[-2:]
    assert NESTED_RULE in first and NESTED_RULE not in second
    assert "x" * 100 in second
    assert [hop for hop in hops if hop.endswith(("._blocking", "._nested"))] == ["WorkspaceToolset._blocking"]
    assert [f["applies_to"] for f in result.structured_content["instructions"]] == [".", "pkg"]
