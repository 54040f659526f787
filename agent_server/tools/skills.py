"""Agent Skills: found in the workspace and the user's skill libraries, loaded on demand (`load_skill`).

A skill is a folder holding a `SKILL.md`: YAML front matter between `---` lines, then its instructions in
Markdown, and any files it refers to (scripts, references, assets). Where skills are found, in this order
(the first of a name wins; a later one is skipped naming the first): the workspace's `.agents/skills/*/` and
`.claude/skills/*/`, then each of `skills_dirs`. Progressive disclosure, as the standard intends: the system
prompt lists each skill's name and description only; `load_skill(name)` returns the body and the list of the
skill's files, which the model reads with `read_file` (a listed library skill's folder is readable even outside
the workspace: `tools.workspace`). A skill's scripts run only through `run_command`, with its approvals.

The front matter is checked as the Agent Skills specification says: `name` 1-64 characters of lowercase
letters, digits and single hyphens (not at either end), equal to the folder's name; `description` 1-1024
characters; `compatibility`, when given, at most 500; `metadata`, when given, a mapping. Other keys are
allowed and ignored. A skill that breaks a rule is skipped with the reason (`agent_tools` lists it), never
failing the others. It is parsed with PyYAML's safe loader (libyaml's parser when present), from at most
`FRONT_MATTER_MAX_BYTES`, once a cheap scan found it nested no deeper than `NESTING_MAX` brackets.

Bounds, since a workspace may be hostile: at most `limit` (`skills_max`) folders are looked at in all, the
first by name of each place in order (`heapq.nsmallest` over the directory listing: memory stays bounded
however many folders there are), and the rest only counted; a workspace skill folder whose real path leaves
the workspace is skipped; `SKILL.md` is read up to `max_bytes`, a skill's file list up to `FILES_MAX`
entries. Everything here blocks on the file system: call it from a worker thread.
"""

from __future__ import annotations

import codecs
import collections
import functools
import heapq
import logging
import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_server.front_matter import FrontMatterError, split_front_matter
from agent_server.types import SkillInfo, SkippedSkill

logger = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
WORKSPACE_SKILL_DIRS = (Path(".agents") / "skills", Path(".claude") / "skills")
"""Where a workspace keeps its skills, relative to it."""
FRONT_MATTER_MAX_BYTES = 8 * 1024
"""A skill's front matter must end within this many bytes of its SKILL.md."""
FILES_MAX = 200
"""`load_skill` lists at most this many of a skill's files."""
NAME_MAX = 64
DESCRIPTION_MAX = 1024
COMPATIBILITY_MAX = 500
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


@dataclass(frozen=True)
class Skill:
    info: SkillInfo
    folder: Path
    """The skill's folder, resolved (symlinks followed)."""
    file: Path
    """Its SKILL.md, resolved."""


@dataclass(frozen=True)
class SkillScan:
    skills: list[Skill]
    skipped: list[SkippedSkill]
    unlisted: int
    """Folders not looked at, past the limit."""


@dataclass(frozen=True)
class SkillSources:
    """Where one workspace's skills come from, and the bounds of reading them."""

    workspace: Path
    """Resolved."""
    dirs: tuple[Path, ...] = ()
    """The user's skill libraries (`skills_dirs`), resolved."""
    limit: int = 100
    max_bytes: int = 64 * 1024

    def places(self) -> list[tuple[Path, bool]]:
        """Each place skills may be, with whether it is in the workspace."""
        own = [(self.workspace / rel, True) for rel in WORKSPACE_SKILL_DIRS]
        return own + [(directory, False) for directory in self.dirs]

    @functools.cached_property
    def _place_names(self) -> tuple[str, ...]:
        return tuple(str(place) for place, _ in self.places())

    def any_place(self) -> bool:
        """Whether any of the places exists (a few `stat` calls, asked every turn: cheap enough on the event
        loop, with the paths built once)."""
        return self.limit > 0 and any(map(os.path.isdir, self._place_names))

    def shown(self, path: Path) -> str:
        """A path as the model names it: relative to the workspace when inside, else absolute."""
        return path.relative_to(self.workspace).as_posix() if path.is_relative_to(self.workspace) else str(path)


def find_skills(sources: SkillSources) -> SkillScan:
    """The skills of every place (see the module docstring)."""
    skills: dict[str, Skill] = {}
    skipped: list[SkippedSkill] = []
    unlisted = 0
    room = sources.limit
    for place, inside in sources.places():
        names, total = _first_names(place, room)
        unlisted += total - len(names)
        room -= len(names)
        for name in names:
            folder = place / name
            found = _skill(sources, folder, inside)
            if isinstance(found, str):
                skipped.append(SkippedSkill(path=sources.shown(folder), reason=found))
            elif found is None:
                continue
            elif (first := skills.get(found.info.name)) is not None:
                reason = f"the name {found.info.name!r} is already taken by {first.info.path}"
                skipped.append(SkippedSkill(path=found.info.path, reason=reason))
            else:
                skills[found.info.name] = found
    return SkillScan(skills=list(skills.values()), skipped=skipped, unlisted=unlisted)


def _first_names(place: Path, room: int) -> tuple[list[str], int]:
    """The first `room` entry names of `place` by name (hidden ones left out), and how many entries there are."""
    counted = 0

    def names(scan: Iterator[os.DirEntry[str]]) -> Iterator[str]:
        nonlocal counted
        for entry in scan:
            if not entry.name.startswith("."):
                counted += 1
                yield entry.name

    try:
        with os.scandir(place) as scan:
            listed = names(scan)
            first = heapq.nsmallest(room, listed) if room > 0 else []
            collections.deque(listed, maxlen=0)  # counts the rest (nsmallest takes none when there is no room)
    except (FileNotFoundError, NotADirectoryError):
        return [], 0
    except OSError as exc:
        logger.warning("cannot list skills in %s: %s", place, exc.strerror)
        return [], 0
    return first, counted


def _skill(sources: SkillSources, folder: Path, inside: bool) -> Skill | str | None:
    """The skill in `folder`, the reason it is skipped, or None for an entry that is no skill folder (a file)."""
    try:
        real = folder.resolve()
        if not real.is_dir():
            return None
        file = (folder / SKILL_FILE).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop: RuntimeError before 3.13
        return f"cannot read the folder: {exc}"
    if inside and not real.is_relative_to(sources.workspace):
        return "the folder leads outside the workspace (a symlink); a workspace skill must lie inside it"
    if not file.is_relative_to(real):
        return f"its {SKILL_FILE} leads outside the skill's folder (a symlink)"
    try:
        info = file.stat()
        if not stat.S_ISREG(info.st_mode):
            return f"its {SKILL_FILE} is not a regular file"
        with file.open("rb") as handle:
            head = handle.read(min(FRONT_MATTER_MAX_BYTES, sources.max_bytes))
    except FileNotFoundError:
        return f"it has no {SKILL_FILE}"
    except OSError as exc:
        return f"cannot read its {SKILL_FILE}: {exc.strerror}"
    try:
        # Not `final`: the head may end inside a character; invalid UTF-8 before that still fails.
        text = codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
        meta, _ = split_front_matter(text, file=SKILL_FILE, head_bytes=FRONT_MATTER_MAX_BYTES)
        name, description = check_front_matter(meta, folder.name)
    except UnicodeDecodeError:
        return f"its {SKILL_FILE} is not UTF-8 text"
    except FrontMatterError as exc:
        return str(exc)
    return Skill(SkillInfo(name=name, description=description, path=sources.shown(folder / SKILL_FILE)), real, file)


def check_front_matter(meta: dict[str, Any], folder_name: str) -> tuple[str, str]:
    """`(name, description)` of valid front matter.

    Raises:
        FrontMatterError: a rule of the specification is broken (the message says which).
    """
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise FrontMatterError("the front matter has no `name` (a string)")
    if len(name) > NAME_MAX or not _NAME.fullmatch(name):
        raise FrontMatterError(
            f"the name {name[: NAME_MAX + 1]!r} breaks the rules: at most {NAME_MAX} lowercase letters, digits and "
            "single hyphens, not at either end"
        )
    if name != folder_name:
        raise FrontMatterError(f"the name {name!r} is not its folder's name {folder_name!r}")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise FrontMatterError("the front matter has no `description` (a non-empty string)")
    if len(description) > DESCRIPTION_MAX:
        raise FrontMatterError(f"the description has {len(description)} characters, over {DESCRIPTION_MAX}")
    compatibility = meta.get("compatibility")
    if compatibility is not None and (not isinstance(compatibility, str) or len(compatibility) > COMPATIBILITY_MAX):
        raise FrontMatterError(f"`compatibility` must be a string of at most {COMPATIBILITY_MAX} characters")
    if "metadata" in meta and not isinstance(meta["metadata"], dict):
        raise FrontMatterError("`metadata` must be a mapping")
    return name, " ".join(description.split())


def skill_files(skill: Skill) -> tuple[list[str], bool]:
    """The skill's files (as the model names them, by name, depth first, SKILL.md and hidden entries left out)
    and whether the list was cut at `FILES_MAX` files (or `FILES_MAX` folders looked into); symlinks that lead
    out of the skill's folder are left out. Each folder's listing is read lazily, keeping its first entries by
    name only, so a folder of a million entries costs time in the worker thread, not memory."""
    found: list[str] = []
    folders = [skill.folder]
    looked = 0
    while folders and looked < FILES_MAX:
        folder = folders.pop()
        looked += 1
        names, _ = _first_names(folder, FILES_MAX + 1)
        below: list[Path] = []
        for name in names:
            path = folder / name
            try:
                real = path.resolve()
                if not real.is_relative_to(skill.folder):
                    continue
                if real.is_dir():
                    below.append(path)
                    continue
            except (OSError, RuntimeError):
                continue
            if real == skill.file:
                continue
            if len(found) >= FILES_MAX:
                return found, True
            found.append(_listed(skill, path))
        folders += reversed(below)  # the first folder by name is looked into next
    return found, bool(folders)


def _listed(skill: Skill, path: Path) -> str:
    """A skill's file under the folder as listed (its SKILL.md's parent), which `read_file` takes."""
    listed = Path(skill.info.path).parent
    return (listed / path.relative_to(skill.folder)).as_posix()


def read_body(skill: Skill, max_bytes: int) -> tuple[str, bool]:
    """The skill's instructions (after the front matter), cut at `max_bytes` of the file, and whether it was cut.

    Raises:
        FrontMatterError, OSError, UnicodeDecodeError: the file changed since it was found.
    """
    with skill.file.open("rb") as handle:
        data = handle.read(max_bytes + 1)
    truncated = len(data) > max_bytes
    text = data[:max_bytes].decode("utf-8", errors="ignore" if truncated else "strict")
    _, body = split_front_matter(text, file=SKILL_FILE)
    return body.strip(), truncated


def by_name(scan: SkillScan, name: str) -> Skill | None:
    return next((skill for skill in scan.skills if skill.info.name == name), None)


def names_of(skills: Sequence[Skill]) -> str:
    return ", ".join(skill.info.name for skill in skills) or "none"
