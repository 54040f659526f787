"""The built-in tools that change files: `write_file` and `edit_file`, confined to the workspace.

Paths are judged as for the read tools (`workspace.py`): `..`, an absolute path outside, a symlink
leading out, and writing through a symlink whose target is outside are all refused with an error
result, and nothing is written. Two places inside the workspace are refused as well, by decision:

- any `.git` directory (at any depth, in any letter case): a written hook or config runs code the next
  time someone uses git there, which would turn file writes into command execution;
- the agent server's own state: `<workspace>/.agent_server` (its sessions database and the prompt files
  that steer the agent) and the state directory, wherever it is.

A write is atomic: the new text goes to a temporary file in the same directory, is flushed to disk,
and replaces the file with `os.replace`, so a failed write leaves the old file whole (and no temporary
file behind). A replaced file keeps its permission bits; a new one gets the usual ones (umask
applied). Replacing makes a new file: a hard link to the old one keeps the old text. Missing parent
directories inside the workspace are created.

`edit_file` replaces exact text (no regex, no whitespace folding) and answers with a short unified
diff. It holds the whole file in memory, so files over `edit_max_bytes` are refused.
"""

from __future__ import annotations

import difflib
import os
import re
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path

from pydantic import Field

from agent_server.errors import ToolFailure
from agent_server.tools.arguments import ToolArguments, input_schema
from agent_server.tools.workspace import PATH_HELP, Output, WorkspacePaths
from agent_server.types import TextPart, ToolAnnotations, ToolSpec

DIFF_CONTEXT_LINES = 3
DIFF_MAX_LINES = 80
"""`edit_file`'s diff shows at most this many lines, then says how many more there were."""
DIFF_LINE_MAX_CHARS = 300
_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


class WriteFileArguments(ToolArguments):
    path: str = Field(description=PATH_HELP)
    content: str = Field(description="The whole new text of the file (UTF-8).")


class EditFileArguments(ToolArguments):
    path: str = Field(description=PATH_HELP)
    old_text: str = Field(description="Exact text to replace, including whitespace and line endings.")
    new_text: str = Field(description="The text to put in its place.")
    replace_all: bool = Field(False, description="Replace every occurrence; by default old_text must occur once.")


ARGUMENTS: dict[str, type[ToolArguments]] = {"write_file": WriteFileArguments, "edit_file": EditFileArguments}
_DESCRIPTIONS = {
    "write_file": (
        "Create or overwrite a workspace file with the given text; missing parent directories are created. "
        "Replaces the whole file: to change part of a file, use edit_file."
    ),
    "edit_file": (
        "Replace exact text in a workspace file: old_text must occur exactly once (or set replace_all). "
        "Returns a unified diff of the change. Read the file first to copy old_text exactly."
    ),
}
_ANNOTATIONS = {
    "write_file": ToolAnnotations(read_only=False, destructive=True, idempotent=True, open_world=False),
    "edit_file": ToolAnnotations(read_only=False, destructive=True, idempotent=False, open_world=False),
}
SPECS: dict[str, ToolSpec] = {
    name: ToolSpec(
        name=name,
        description=description,
        input_schema=input_schema(ARGUMENTS[name]),
        annotations=_ANNOTATIONS[name],
    )
    for name, description in _DESCRIPTIONS.items()
}


class FileWriter:
    """`write_file` and `edit_file` over one workspace (blocking: the toolset runs them in a worker thread)."""

    def __init__(self, paths: WorkspacePaths, *, state_dir: Path | None, edit_max_bytes: int) -> None:
        self._paths = paths
        protected = [paths.root / ".agent_server"]
        if state_dir is not None:
            protected.append(state_dir.expanduser().resolve())
        self._protected = protected
        self._edit_max = edit_max_bytes

    def write_file(self, args: WriteFileArguments) -> Output:
        path = self._writable(args.path)
        existed = path.exists()
        if existed and not path.is_file():
            raise ToolFailure(f"{args.path!r} exists and is not a regular file")
        data = _encode(args.content, "content")
        self._make_parent(path, args.path)
        _atomic_write(path, data)
        rel = self._paths.rel(path)
        verb = "Replaced" if existed else "Created"
        text = f"{verb} {rel} ({len(data)} bytes)"
        return [TextPart(text=text)], {"path": rel, "bytes": len(data), "created": not existed}

    def edit_file(self, args: EditFileArguments) -> Output:
        if not args.old_text:
            raise ToolFailure("old_text is empty; give the exact text to replace (write_file writes a whole file)")
        path = self._writable(args.path)
        before = self._read_text(path, args.path)
        count = before.count(args.old_text)
        if count == 0:
            raise ToolFailure(_not_found(args.path, before, args.old_text))
        if count > 1 and not args.replace_all:
            raise ToolFailure(
                f"old_text occurs {count} times in {args.path!r}; include more surrounding text so it occurs "
                f"once, or set replace_all to replace all {count}"
            )
        if args.new_text == args.old_text:
            raise ToolFailure("new_text is the same as old_text; nothing to change")
        after = before.replace(args.old_text, args.new_text, -1 if args.replace_all else 1)
        _atomic_write(path, _encode(after, "new_text"))
        rel = self._paths.rel(path)
        replaced = count if args.replace_all else 1
        diff = short_diff(rel, before, after)
        text = f"Edited {rel}: replaced {replaced} occurrence{'s' if replaced > 1 else ''}\n{diff}"
        return [TextPart(text=text)], {"path": rel, "replacements": replaced}

    def _writable(self, raw: str) -> Path:
        """The real path to write for `raw`; ToolFailure when it is outside or protected (module docstring)."""
        path = self._paths.resolve(raw)
        if path == self._paths.root or path.is_dir():
            raise ToolFailure(f"{raw!r} is a directory")
        if any(part.lower() == ".git" for part in path.relative_to(self._paths.root).parts):
            raise ToolFailure(f"{raw!r} is inside a .git directory, which the write tools do not change")
        if any(path.is_relative_to(place) for place in self._protected):
            raise ToolFailure(f"{raw!r} is in the agent server's state directory, which the write tools do not change")
        return path

    def _make_parent(self, path: Path, raw: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Checked again once it exists: a directory swapped for a symlink meanwhile must not lead out.
        if not path.parent.resolve().is_relative_to(self._paths.root):
            raise ToolFailure(f"path {raw!r} is outside the workspace")

    def _read_text(self, path: Path, raw: str) -> str:
        if not path.exists():
            raise ToolFailure(f"file not found: {raw!r} (write_file creates a file)")
        if not path.is_file():
            raise ToolFailure(f"{raw!r} is not a regular file")
        with path.open("rb") as handle:
            data = handle.read(self._edit_max + 1)
        if len(data) > self._edit_max:
            raise ToolFailure(f"{raw!r} is over the edit limit of {self._edit_max} bytes; use write_file")
        if b"\x00" in data:
            raise ToolFailure(f"{raw!r} is a binary file; edit_file edits UTF-8 text")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ToolFailure(f"{raw!r} is not UTF-8 text (byte {exc.start}); edit_file edits UTF-8 text") from None


def _not_found(raw: str, text: str, old_text: str) -> str:
    message = f"old_text was not found in {raw!r}; it must match exactly, including whitespace and indentation"
    if "\r\n" in text and "\r" not in old_text and old_text.replace("\n", "\r\n") in text:
        message += " (the file has CRLF line endings: write \\r\\n in old_text)"
    return message


def _encode(text: str, argument: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolFailure(f"{argument} is not valid Unicode (it holds a lone surrogate)") from None


def _atomic_write(path: Path, data: bytes) -> None:
    """`data` as the file at `path`, or the file as it was: temporary file, fsync, `os.replace`."""
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else None
    temporary = path.with_name(f".{path.name[:200]}.{secrets.token_hex(4)}.tmp")
    # 0o666 with O_EXCL: the umask applies as for any new file, and an existing path is never followed.
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def short_diff(rel: str, before: str, after: str) -> str:
    """A unified diff of the change, at most `DIFF_MAX_LINES` lines, with a note of what was left out.

    Only the changed region (between the common first and last lines) is compared, so a small edit
    of a large file costs little; hunk headers still give the file's own line numbers.
    """
    old, new = before.splitlines(), after.splitlines()
    head = _common_prefix(old, new)
    tail = _common_prefix(reversed(old[head:]), reversed(new[head:]))
    start = max(head - DIFF_CONTEXT_LINES, 0)
    keep_tail = max(tail - DIFF_CONTEXT_LINES, 0)
    lines = difflib.unified_diff(
        old[start : len(old) - keep_tail],
        new[start : len(new) - keep_tail],
        fromfile=f"a/{rel}",
        tofile=f"b/{rel}",
        n=DIFF_CONTEXT_LINES,
        lineterm="",
    )
    shown: list[str] = []
    more = 0
    for line in lines:
        if len(shown) >= DIFF_MAX_LINES:
            more += 1
            continue
        shown.append(_shift_hunk(line, start) if line.startswith("@@") else _clip(line))
    if more:
        shown.append(f"[diff cut: {more} more lines]")
    return "\n".join(shown)


def _common_prefix(first: Iterable[str], second: Iterable[str]) -> int:
    count = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        count += 1
    return count


def _shift_hunk(line: str, offset: int) -> str:
    """A hunk header of a diff of lines `offset:` renumbered as lines of the whole file."""
    found = _HUNK.match(line)
    if found is None:
        return line
    old_start, old_len, new_start, new_len = found.groups()
    return f"@@ -{int(old_start) + offset}{old_len or ''} +{int(new_start) + offset}{new_len or ''} @@"


def _clip(line: str) -> str:
    return line if len(line) <= DIFF_LINE_MAX_CHARS else line[:DIFF_LINE_MAX_CHARS] + "…"
