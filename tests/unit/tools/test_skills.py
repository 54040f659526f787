"""Skill discovery and `load_skill`: the Agent Skills front matter rules (a bad skill skipped with its reason,
never fatal), the places in order, and the bounds a hostile workspace meets (folder count, file sizes,
symlinks, bad YAML)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from agent_server.agent.prompts import build_prompt_parts, render_system_prompt
from agent_server.errors import ToolFailure
from agent_server.tools import guidance as guidance_module
from agent_server.tools.guidance import LoadSkillArguments, WorkspaceGuide, load_skill
from agent_server.tools.skills import FILES_MAX, FRONT_MATTER_MAX_BYTES, SkillSources, find_skills

pytestmark = pytest.mark.anyio


def _skill(place: Path, folder: str, front_matter: str, body: str = "Do it.") -> Path:
    path = place / folder
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(f"---\n{front_matter}\n---\n{body}\n")
    return path


def _sources(workspace: Path, *dirs: Path, limit: int = 100, max_bytes: int = 64 * 1024) -> SkillSources:
    return SkillSources(
        workspace=workspace.resolve(), dirs=tuple(d.resolve() for d in dirs), limit=limit, max_bytes=max_bytes
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def _place(workspace: Path) -> Path:
    place = workspace / ".agents" / "skills"
    place.mkdir(parents=True, exist_ok=True)
    return place


@pytest.mark.parametrize(
    ("folder", "front_matter", "reason"),
    [
        ("Upper", "name: Upper\ndescription: d", "breaks the rules"),
        ("a--b", "name: a--b\ndescription: d", "breaks the rules"),
        ("-ab", "name: -ab\ndescription: d", "breaks the rules"),
        ("ab-", "name: ab-\ndescription: d", "breaks the rules"),
        ("a" * 65, f"name: {'a' * 65}\ndescription: d", "at most 64"),
        ("other", "name: mine\ndescription: d", "is not its folder's name 'other'"),
        ("nodesc", "name: nodesc", "no `description`"),
        ("emptydesc", "name: emptydesc\ndescription: '  '", "no `description`"),
        ("longdesc", "name: longdesc\ndescription: " + "d" * 1025, "1025 characters, over 1024"),
        ("numname", "name: 123\ndescription: d", "no `name`"),
        ("compat", "name: compat\ndescription: d\ncompatibility: " + "c" * 501, "`compatibility`"),
        ("meta", "name: meta\ndescription: d\nmetadata: [1, 2]", "`metadata` must be a mapping"),
        ("badyaml", "name: badyaml\ndescription: [unclosed", "not valid YAML"),
        ("listtop", "- name\n- description", "not a mapping"),
        ("deep", "name: deep\ndescription: d\nx: " + "[" * 3000 + "]" * 3000, "nested too deeply"),
        ("baddate", "name: baddate\ndescription: d\nwhen: 2001-13-45", "not valid YAML"),
        ("pyobj", "name: pyobj\ndescription: !!python/object/apply:os.system [echo]", "not valid YAML"),
    ],
)
def test_a_skill_breaking_a_rule_is_skipped_with_the_reason(
    workspace: Path, folder: str, front_matter: str, reason: str
) -> None:
    place = _place(workspace)
    _skill(place, folder, front_matter)
    _skill(place, "good", "name: good\ndescription: a good one")
    scan = find_skills(_sources(workspace))
    assert [skill.info.name for skill in scan.skills] == ["good"]
    [skipped] = scan.skipped
    assert skipped.path == f".agents/skills/{folder}"
    assert reason in skipped.reason, skipped.reason


def test_bad_yaml_names_the_line(workspace: Path) -> None:
    _skill(_place(workspace), "x", "name: x\ndescription: ok\nkey: : : [")
    [skipped] = find_skills(_sources(workspace)).skipped
    assert "not valid YAML" in skipped.reason and "(line 4)" in skipped.reason, skipped.reason


def test_the_standards_yaml_forms_are_read(workspace: Path) -> None:
    place = _place(workspace)
    _skill(place, "folded", "name: folded\ndescription: >\n  Two lines\n  folded into one.\nlicense: MIT")
    _skill(place, "quoted", "name: 'quoted'\ndescription: \"Says: yes, with a colon.\"\nallowed-tools: Bash Read")
    _skill(place, "meta", "name: meta\ndescription: |\n  Block\n  text\nmetadata:\n  author: someone\n  version: '2'")
    scan = find_skills(_sources(workspace))
    assert [(s.info.name, s.info.description) for s in scan.skills] == [
        ("folded", "Two lines folded into one."),
        ("meta", "Block text"),
        ("quoted", "Says: yes, with a colon."),
    ]
    assert scan.skipped == []


def test_front_matter_must_open_and_close_within_the_limit(workspace: Path) -> None:
    place = _place(workspace)
    (place / "nofence").mkdir()
    (place / "nofence" / "SKILL.md").write_text("# No front matter\n")
    (place / "long").mkdir()
    (place / "long" / "SKILL.md").write_text("---\nname: long\ndescription: d\n# " + "x" * FRONT_MATTER_MAX_BYTES)
    (place / "empty").mkdir()
    (place / "README.md").write_text("not a skill folder: passed over silently")
    reasons = {s.path.rsplit("/", 1)[-1]: s.reason for s in find_skills(_sources(workspace)).skipped}
    assert "does not begin with a front matter line" in reasons["nofence"]
    assert f"not closed by a '---' line within its first {FRONT_MATTER_MAX_BYTES} bytes" in reasons["long"]
    assert "has no SKILL.md" in reasons["empty"]
    assert set(reasons) == {"nofence", "long", "empty"}


def test_the_first_place_keeps_a_name_and_symlinks_out_are_skipped(workspace: Path, tmp_path: Path) -> None:
    library = tmp_path / "library"
    _skill(_place(workspace), "shared", "name: shared\ndescription: the workspace's")
    _skill(library, "shared", "name: shared\ndescription: the library's")
    own = _skill(workspace / ".claude" / "skills", "linked", "name: linked\ndescription: d")
    (own / "SKILL.md").unlink()
    (tmp_path / "SKILL.md").write_text("---\nname: linked\ndescription: d\n---\n")
    os.symlink(tmp_path / "SKILL.md", own / "SKILL.md")
    scan = find_skills(_sources(workspace, library))
    assert [(s.info.name, s.info.description) for s in scan.skills] == [("shared", "the workspace's")]
    reasons = {s.path: s.reason for s in scan.skipped}
    assert "already taken by .agents/skills/shared/SKILL.md" in reasons[str(library.resolve() / "shared" / "SKILL.md")]
    assert "leads outside the skill's folder" in reasons[".claude/skills/linked"]


def test_ten_thousand_folders_are_counted_and_only_the_first_by_name_looked_at(workspace: Path) -> None:
    """A hostile workspace at full size (about a second, spent making the 10,000 folders)."""
    place = _place(workspace)
    for index in range(10_000):
        (place / f"s{index:05d}").mkdir()
    for index in (3, 7):  # two real skills among the first folders by name
        (place / f"s{index:05d}" / "SKILL.md").write_text(f"---\nname: s{index:05d}\ndescription: d\n---\n")
    scan = find_skills(_sources(workspace, limit=10))
    assert [s.info.name for s in scan.skills] == ["s00003", "s00007"]
    assert len(scan.skipped) == 8 and scan.unlisted == 9_990
    guidance = WorkspaceGuide(_sources(workspace, limit=10), ("AGENTS.md",), 1024).scan()
    prompt = render_system_prompt(build_prompt_parts(None, None, guidance))
    assert "[9990 more skill folder(s) were not looked at: the limit is skills_max]" in prompt


def test_the_skill_list_is_byte_stable_whatever_order_folders_were_made_in(tmp_path: Path) -> None:
    prompts: list[str] = []
    for order in ([3, 1, 2], [2, 3, 1]):
        workspace = tmp_path / f"ws{order[0]}"
        for index in order:
            _skill(_place(workspace), f"k{index}", f"name: k{index}\ndescription: skill {index}")
        (workspace / "AGENTS.md").write_text("Rules.\n")
        guidance = WorkspaceGuide(_sources(workspace), ("AGENTS.md",), 1024).scan()
        prompts.append(render_system_prompt(build_prompt_parts(None, None, guidance)))
    assert prompts[0] == prompts[1]
    assert prompts[0].index("- k1:") < prompts[0].index("- k2:") < prompts[0].index("- k3:")


def test_load_skill_returns_the_body_and_files_bounded(workspace: Path) -> None:
    folder = _skill(_place(workspace), "big", "name: big\ndescription: d", "BODY-START " + "y" * 5000)
    (folder / "files").mkdir()
    for index in range(FILES_MAX + 5):
        (folder / "files" / f"f{index:03d}.txt").write_text("z")
    content, structured = load_skill(_sources(workspace, max_bytes=2048), LoadSkillArguments(name="big"))
    text = content[0].text  # pyright: ignore[reportAttributeAccessIssue]
    assert "BODY-START" in text and "name: big" not in text
    assert "[cut at 2048 bytes (skill_max_bytes); read the rest with read_file]" in text
    assert len(text) < 2048 + FILES_MAX * 60
    assert structured["truncated"] and structured["files_truncated"]
    assert len(structured["files"]) == FILES_MAX
    assert structured["files"][0] == ".agents/skills/big/files/f000.txt"
    assert f"[only the first {FILES_MAX} files are listed]" in text


def test_load_skill_of_an_unknown_name_lists_the_skills(workspace: Path) -> None:
    _skill(_place(workspace), "known", "name: known\ndescription: d")
    with pytest.raises(ToolFailure, match="no skill named 'nope'; the skills are: known"):
        load_skill(_sources(workspace), LoadSkillArguments(name="nope"))


async def test_the_scan_runs_in_a_worker_thread(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _skill(_place(workspace), "one", "name: one\ndescription: d")
    threads: list[threading.Thread] = []
    real = guidance_module.find_skills

    def spy(sources: SkillSources):  # noqa: ANN202 - the wrapped function's own type
        threads.append(threading.current_thread())
        return real(sources)

    monkeypatch.setattr(guidance_module, "find_skills", spy)
    found = await WorkspaceGuide(_sources(workspace), ("AGENTS.md",), 1024).guidance()
    assert [s.name for s in found.skills] == ["one"]
    assert threads and threads[0] is not threading.main_thread()


def test_a_symlink_loop_and_invalid_utf8_are_skipped_and_later_places_still_counted(
    workspace: Path, tmp_path: Path
) -> None:
    place = _place(workspace)
    os.symlink(place / "loop", place / "loop")
    (place / "latin1").mkdir()
    (place / "latin1" / "SKILL.md").write_bytes(b"---\nname: latin1\ndescription: caf\xe9\n---\n")
    library = tmp_path / "library"
    for name in ("l1", "l2", "l3"):
        _skill(library, name, f"name: {name}\ndescription: d")
    scan = find_skills(_sources(workspace, library, limit=2))
    reasons = {s.path: s.reason for s in scan.skipped}
    assert "is not UTF-8 text" in reasons[".agents/skills/latin1"]
    assert "cannot read the folder" in reasons[".agents/skills/loop"]
    assert scan.skills == [] and scan.unlisted == 3  # the library's three, past the limit, are counted
