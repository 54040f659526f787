"""Where the built-in tools may go: paths confined to the workspace root, for reading and for writing.

A path argument is relative to the workspace root (an absolute path inside it is accepted too). It is
judged by where it really leads: resolved, following `..` and symlinks at every component (a dangling
symlink by its target), and a path whose target lies outside the root is refused with an error naming
it, never clamped. Writing through a symlink therefore writes its target, and only when that is inside.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_server.errors import ToolFailure
from agent_server.types import ContentPart

Output = tuple[list[ContentPart], dict[str, Any]]
"""What a built-in tool returns: the content the model reads and the structured result."""

PATH_HELP = "Path relative to the workspace root (an absolute path inside the workspace also works)."


class WorkspacePaths:
    """Path resolution confined to one workspace root."""

    def __init__(self, workspace: Path) -> None:
        self.root = workspace.expanduser().resolve()

    def resolve(self, raw: str) -> Path:
        """The real path `raw` leads to; ToolFailure when it is outside the workspace."""
        if "\x00" in raw:
            raise ToolFailure(f"path {raw!r} contains a NUL character")
        candidate = Path(raw)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as exc:  # a symlink loop: RuntimeError before 3.13
            raise ToolFailure(f"cannot resolve path {raw!r}: {exc}") from exc
        if not resolved.is_relative_to(self.root):
            raise ToolFailure(f"path {raw!r} is outside the workspace")
        return resolved

    def rel(self, path: Path) -> str:
        """`path` (inside the root) as the model names it: relative, with `/`, `.` for the root."""
        return path.relative_to(self.root).as_posix() or "."

    def describe_os_error(self, exc: OSError) -> str:
        """The error's reason, naming its file when that is inside the workspace (never a path outside)."""
        reason = exc.strerror or str(exc)
        if isinstance(exc.filename, str) and Path(exc.filename).is_relative_to(self.root):
            return f"{self.rel(Path(exc.filename))!r}: {reason}"
        return reason
