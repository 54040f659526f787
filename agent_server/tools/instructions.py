"""Project instruction files (`AGENTS.md`, else `CLAUDE.md`: `instruction_files`), read bounded.

The workspace root's file goes into the system prompt (`agent.prompts`). A subdirectory's own file governs the
work under it, as the AGENTS.md convention says, and the nearest one wins where they disagree: it is given to
the model with the result of the first tool call of a turn that touches a path under that subdirectory
(`nested_instructions`), outermost first. So the system prompt never changes within a turn (provider prompt
caches keep working), and a file the turn never comes near costs nothing.

Each file is read up to `max_bytes` (`instructions_max_bytes`) and cut there with a note; a file that is not a
regular file, is binary (a NUL byte), is empty, or whose real path (symlinks followed) leaves the workspace is
passed over (logged), so the next name of the list is tried. Blocking: call from a worker thread.
"""

from __future__ import annotations

import codecs
import logging
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agent_server.types import InstructionFile, InstructionText, ToolResult

logger = logging.getLogger(__name__)


def instructions_in(directory: Path, root: Path, names: Sequence[str], max_bytes: int) -> InstructionText | None:
    """The instructions of `directory` (inside the resolved workspace `root`): its first readable file of `names`."""
    for name in names:
        found = _read(directory / name, root, max_bytes)
        if found is not None:
            return found
    return None


def nested_instructions(
    root: Path, target: Path, names: Sequence[str], max_bytes: int, *, skip: frozenset[str] = frozenset()
) -> list[InstructionText]:
    """The instructions of each directory strictly below `root` down to `target` (a resolved path inside it;
    a file's own directory counts), outermost first, leaving out the directories in `skip` (relative, `/`)."""
    if not target.is_relative_to(root) or target == root:
        return []
    parts = target.relative_to(root).parts
    if not target.is_dir():
        parts = parts[:-1]
    found: list[InstructionText] = []
    for depth in range(1, len(parts) + 1):
        rel = "/".join(parts[:depth])
        if rel in skip:
            continue
        text = instructions_in(root.joinpath(*parts[:depth]), root, names, max_bytes)
        if text is not None:
            found.append(text)
    return found


def _touched_path(result: ToolResult) -> str | None:
    """The workspace path (relative) a successful call's structured output says it worked on, if any (what
    the built-in tools report as `path`)."""
    path = None if result.is_error or result.structured is None else result.structured.get("path")
    return path if isinstance(path, str) and path not in ("", ".") and not path.startswith("/") else None


@dataclass(frozen=True)
class InstructionLookup:
    """The subdirectory instruction files of one workspace, looked up by a built-in tool right after its call, in
    the same worker thread (`ToolResult.found_instructions`: the turn picks those it has not had yet). Each call
    reads the files along its path again, a few at most, each within `max_bytes`: cheaper than a second hop."""

    root: Path
    names: tuple[str, ...]
    """`instruction_files`."""
    max_bytes: int
    """`instructions_max_bytes`."""

    def after(self, result: ToolResult) -> tuple[InstructionText, ...]:
        """The files along the path `result` says its call worked on. That path is where the call really went
        (a built-in tool reports its resolved path, relative to the root), so it is taken as it is; each file
        on the way is still resolved and passed over when it leads outside (`_read`)."""
        path = _touched_path(result)
        if path is None:
            return ()
        return tuple(nested_instructions(self.root, self.root / path, self.names, self.max_bytes))


def _read(path: Path, root: Path, max_bytes: int) -> InstructionText | None:
    try:
        os.lstat(path)  # most directories have none: one call, not one per component of the path to resolve
        real = path.resolve()
        info = real.stat()
    except FileNotFoundError:
        return None
    except (OSError, RuntimeError) as exc:
        logger.warning("cannot read instruction file %s: %s", path, exc)
        return None
    if not real.is_relative_to(root):
        logger.warning("instruction file %s is passed over: it leads outside the workspace", path)
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    try:
        with real.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        logger.warning("cannot read instruction file %s: %s", path, exc.strerror)
        return None
    if b"\x00" in data:
        logger.warning("instruction file %s is passed over: it is binary", path)
        return None
    truncated = len(data) > max_bytes
    kept = data[:max_bytes]
    # An incremental decode without `final` leaves out a character cut in half at the limit.
    text = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(kept, final=not truncated).strip()
    if not text:
        return None
    rel = path.relative_to(root).as_posix()
    applies_to = path.parent.relative_to(root).as_posix() or "."
    if truncated:
        text += (
            f"\n\n[{rel} is cut here: it is {info.st_size} bytes, over the limit of {max_bytes} bytes"
            " (instructions_max_bytes)]"
        )
    described = InstructionFile(
        path=rel, applies_to=applies_to, size=info.st_size, included_bytes=len(kept), truncated=truncated
    )
    return InstructionText(file=described, text=text)
