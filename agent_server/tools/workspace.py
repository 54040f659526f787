"""Where the built-in tools may go: paths confined to the workspace root, for reading and for writing.

A path argument is relative to the workspace root (an absolute path inside it is accepted too). It is
judged by where it really leads: resolved, following `..` and symlinks at every component (a dangling
symlink by its target), and a path whose target lies outside the root is refused with an error naming
it, never clamped. Writing through a symlink therefore writes its target, and only when that is inside.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_server.errors import ToolFailure
from agent_server.types import ContentPart

Output = tuple[list[ContentPart], dict[str, Any]]
"""What a built-in tool returns: the content the model reads and the structured result."""

PATH_HELP = "Path relative to the workspace root (an absolute path inside the workspace also works)."


class WorkspacePaths:
    """Path resolution confined to one workspace root (and, for reading, the skill folders of `skill_dirs`)."""

    def __init__(self, workspace: Path, skill_dirs: Sequence[Path] = ()) -> None:
        """`skill_dirs`: the user's skill libraries (`skills_dirs`, resolved), whose skill folders are readable."""
        self.root = workspace.expanduser().resolve()
        self._skill_dirs = tuple(skill_dirs)

    def resolve(self, raw: str) -> Path:
        """The real path `raw` leads to; ToolFailure when it is outside the workspace."""
        candidate = self._candidate(raw)
        resolved = _resolved(raw, candidate)
        if not resolved.is_relative_to(self.root):
            raise ToolFailure(f"path {raw!r} is outside the workspace")
        return resolved

    def resolve_readable(self, raw: str) -> Path:
        """As `resolve`, but a path into a skill folder of `skill_dirs` (`<dir>/<name>/` holding a SKILL.md) is
        accepted too, when its real path stays inside that folder's real path (blocking: a few `stat` calls)."""
        candidate = self._candidate(raw)
        resolved = _resolved(raw, candidate)
        if resolved.is_relative_to(self.root):
            return resolved
        folder = self._skill_folder(candidate)
        if folder is None or not resolved.is_relative_to(folder):
            raise ToolFailure(f"path {raw!r} is outside the workspace")
        return resolved

    def _candidate(self, raw: str) -> Path:
        if "\x00" in raw:
            raise ToolFailure(f"path {raw!r} contains a NUL character")
        candidate = Path(raw)
        return candidate if candidate.is_absolute() else self.root / candidate

    def _skill_folder(self, candidate: Path) -> Path | None:
        """The real path of the library skill folder `candidate` names (as written, `..` folded), if any."""
        written = Path(os.path.normpath(candidate))
        for directory in self._skill_dirs:
            if written != directory and written.is_relative_to(directory):
                folder = directory / written.relative_to(directory).parts[0]
                try:
                    if (folder / "SKILL.md").is_file():
                        return folder.resolve()
                except (OSError, RuntimeError):
                    return None
        return None

    def shown(self, path: Path) -> str:
        """`path` as the model names it: `rel` inside the root, else absolute (a library skill's file)."""
        return self.rel(path) if path.is_relative_to(self.root) else path.as_posix()

    def rel(self, path: Path) -> str:
        """`path` (inside the root) as the model names it: relative, with `/`, `.` for the root."""
        return path.relative_to(self.root).as_posix() or "."

    def describe_os_error(self, exc: OSError) -> str:
        """The error's reason, naming its file when that is inside the workspace (never a path outside)."""
        reason = exc.strerror or str(exc)
        if isinstance(exc.filename, str) and Path(exc.filename).is_relative_to(self.root):
            return f"{self.rel(Path(exc.filename))!r}: {reason}"
        return reason


def _resolved(raw: str, candidate: Path) -> Path:
    try:
        return candidate.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop: RuntimeError before 3.13
        raise ToolFailure(f"cannot resolve path {raw!r}: {exc}") from exc
