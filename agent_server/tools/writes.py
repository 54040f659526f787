"""The built-in tools that change files: `write_file` and `edit_file`, confined to the workspace.

Paths are judged as for the read tools (`workspace.py`): `..`, an absolute path outside, a symlink
leading out, and writing through a symlink whose target is outside are all refused with an error
result, and nothing is written. Protected paths (`protected.py`: `.git`, the server's own config files
and state, the config places of editors and agents) are refused too, before anyone is asked
(`FileWriter.screen`), or, where the user opted in, written only when the user allowed that very call.

What was checked is what is written: the path is resolved once (every symlink followed), and then each
directory on the way is opened in the one before it without following a symlink, and the file is read,
written and renamed inside that held directory (`dir_fd`). A directory swapped for a symlink by a racing
process meanwhile fails the write ("changed while it was written"); it never leads the write, or its
temporary file, out of the workspace.

A write is atomic: the new text goes to a temporary file in the same directory (`temporaries.py`: named
so it is recognised, and removed later if its writer was killed), is flushed to disk, and replaces the
file with `os.replace`, so a failed write leaves the old file whole (and no temporary file behind). A
replaced file keeps its permission bits; a new one gets the usual ones (umask applied). Replacing makes
a new file: a hard link to the old one keeps the old text. Missing parent directories inside the
workspace are created. Content over `write_max_bytes` (and an edit whose file would be) is refused.

`edit_file` replaces exact text (no regex, no whitespace folding) and answers with a short unified
diff. It holds the whole file in memory, so files over `edit_max_bytes` are refused.
"""

import difflib
import errno
import os
import re
import stat
from collections.abc import Generator, Iterable
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from agent_server.approvals import user_approved
from agent_server.errors import ToolFailure
from agent_server.tools.arguments import ToolArguments, input_schema
from agent_server.tools.base import Screening
from agent_server.tools.protected import Judgement, ProtectedPaths, refusal, warning
from agent_server.tools.temporaries import StaleTemporaries, temporary_name
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
        kind="edit",
    )
    for name, description in _DESCRIPTIONS.items()
}


class FileWriter:
    """`write_file` and `edit_file` over one workspace (blocking: the toolset runs them in a worker thread)."""

    def __init__(
        self,
        paths: WorkspacePaths,
        *,
        protected: ProtectedPaths,
        edit_max_bytes: int,
        write_max_bytes: int = 8 * 1024 * 1024,
    ) -> None:
        self._paths = paths
        self._protected = protected
        self._edit_max = edit_max_bytes
        self._write_max = write_max_bytes
        self._temporaries = StaleTemporaries()

    def screen(self, tool: str, arguments: dict[str, Any]) -> Screening | None:
        """The word on a call before it is approved (`tools.base.ScreensCalls`): a refusal for a protected
        path or content over the limit, a warning for an opted-in protected path; None otherwise (also for
        arguments that will fail validation: the call says so when it runs)."""
        raw = arguments.get("path")
        if not isinstance(raw, str):
            return None
        content = arguments.get("content")
        try:
            if tool == "write_file" and isinstance(content, str):
                self._check_size(content, "content")
            target = self._target(raw)
        except ToolFailure as exc:
            return Screening(refusal=exc.message)
        return Screening(warning=warning(raw, target.judgement.entry)) if target.judgement.verdict == "ask" else None

    def write_file(self, args: WriteFileArguments) -> Output:
        data = self._check_size(args.content, "content")
        target = self._writable(args.path)
        with _directory(self._paths.root, target.parts[:-1], args.path, create=True) as directory:
            existed = _existing_mode(directory, target.name, args.path) is not None
            self._temporaries.clean(directory)
            _atomic_write(directory, target.name, data)
        rel = self._paths.rel(target.path)
        verb = "Replaced" if existed else "Created"
        text = f"{verb} {rel} ({len(data)} bytes)"
        return [TextPart(text=text)], {"path": rel, "bytes": len(data), "created": not existed}

    def edit_file(self, args: EditFileArguments) -> Output:
        if not args.old_text:
            raise ToolFailure("old_text is empty; give the exact text to replace (write_file writes a whole file)")
        target = self._writable(args.path)
        with _directory(self._paths.root, target.parts[:-1], args.path, create=False) as directory:
            before = self._read_text(directory, target.name, args.path)
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
            replaced = count if args.replace_all else 1
            if len(before) + replaced * (len(args.new_text) - len(args.old_text)) > self._write_max:
                raise ToolFailure(self._too_large("the edited file", None))
            after = before.replace(args.old_text, args.new_text, -1 if args.replace_all else 1)
            data = self._check_size(after, "new_text", what="the edited file")
            self._temporaries.clean(directory)
            _atomic_write(directory, target.name, data)
        rel = self._paths.rel(target.path)
        diff = short_diff(rel, before, after)
        text = f"Edited {rel}: replaced {replaced} occurrence{'s' if replaced > 1 else ''}\n{diff}"
        return [TextPart(text=text)], {"path": rel, "replacements": replaced}

    def _check_size(self, text: str, argument: str, what: str = "content") -> bytes:
        """`text` as UTF-8, at most `write_max_bytes` of it (its length is looked at before it is encoded)."""
        if len(text) > self._write_max:  # each character is at least one byte
            raise ToolFailure(self._too_large(what, None))
        data = _encode(text, argument)
        if len(data) > self._write_max:
            raise ToolFailure(self._too_large(what, len(data)))
        return data

    def _too_large(self, what: str, size: int | None) -> str:
        actual = "" if size is None else f" ({size} bytes)"
        return (
            f"{what} is over the write limit of {self._write_max} bytes{actual} (tools.write_max_bytes); "
            "nothing was written: write less, e.g. a smaller file"
        )

    def _target(self, raw: str) -> "_Target":
        """Where a write to `raw` goes and what protects it; ToolFailure when it is outside, a directory, or
        protected (module docstring)."""
        path = self._paths.resolve(raw)
        if path == self._paths.root or path.is_dir():
            raise ToolFailure(f"{raw!r} is a directory")
        written = Path(os.path.normpath(self._paths.root / raw))
        judgement = self._protected.judge(written, path)
        if judgement.verdict == "refused":
            raise ToolFailure(refusal(raw, judgement.entry))
        return _Target(path, path.relative_to(self._paths.root).parts, judgement)

    def _writable(self, raw: str) -> "_Target":
        """`_target`, and for an opted-in protected path, only when the user allowed this very call."""
        target = self._target(raw)
        if target.judgement.verdict == "ask" and not user_approved():
            raise ToolFailure(
                f"{raw!r} is a protected path (under {target.judgement.entry!r}): a write there needs the user's "
                "own approval of this very call, and it had none; nothing was written"
            )
        return target

    def _read_text(self, directory: int, name: str, raw: str) -> str:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | _NONBLOCK, dir_fd=directory)
        except FileNotFoundError:
            raise ToolFailure(f"file not found: {raw!r} (write_file creates a file)") from None
        except OSError as exc:
            raise _changed_or(exc, directory, name, raw, expected=stat.S_IFREG) from None
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ToolFailure(f"{raw!r} is not a regular file")
            data = handle.read(self._edit_max + 1)
        if len(data) > self._edit_max:
            raise ToolFailure(f"{raw!r} is over the edit limit of {self._edit_max} bytes; use write_file")
        if b"\x00" in data:
            raise ToolFailure(f"{raw!r} is a binary file; edit_file edits UTF-8 text")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ToolFailure(f"{raw!r} is not UTF-8 text (byte {exc.start}); edit_file edits UTF-8 text") from None


@dataclass(frozen=True)
class _Target:
    path: Path
    """Resolved: every symlink followed, so none is left on the way (one found while writing is a change)."""
    parts: tuple[str, ...]
    """`path`'s components below the workspace root."""
    judgement: Judgement

    @property
    def name(self) -> str:
        return self.parts[-1]


_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
"""Opening a FIFO planted under a file's name must not wait for a writer (it is refused as not regular)."""
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@contextmanager
def _directory(root: Path, parts: tuple[str, ...], raw: str, *, create: bool) -> Generator[int]:
    """A descriptor of the directory `root/parts...`, each component opened in the one before it without
    following a symlink (and made when missing, with `create`), so that what was checked is where the write
    goes: a directory swapped for a symlink meanwhile is refused, never followed out of the workspace."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            child = _open_directory(fd, part, raw, create=create)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _open_directory(parent: int, part: str, raw: str, *, create: bool) -> int:
    """The directory `part` in `parent`, opened without following a symlink (made first when missing)."""
    try:
        return os.open(part, _DIRECTORY_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            raise ToolFailure(f"file not found: {raw!r} (write_file creates a file)") from None
    except OSError as exc:
        raise _changed_or(exc, parent, part, raw, expected=stat.S_IFDIR) from None
    with suppress(FileExistsError):  # made meanwhile by someone else: opened below as any other
        os.mkdir(part, 0o777, dir_fd=parent)
    try:
        return os.open(part, _DIRECTORY_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise _changed_or(exc, parent, part, raw, expected=stat.S_IFDIR) from None


def _changed_or(exc: OSError, directory: int, name: str, raw: str, *, expected: int) -> Exception:
    """The error to raise when opening `name` in `directory` failed. The path was resolved without a symlink
    on the way, so a symlink found there (`ELOOP`, or `ENOTDIR` for a directory), or a failure on what is
    again of the `expected` type (`stat.S_IFDIR`, `stat.S_IFREG`) by now, is a change made while writing;
    anything else is the OS error itself."""
    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
        return exc
    try:
        kind = stat.S_IFMT(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode)
    except OSError:
        return exc
    if kind not in (stat.S_IFLNK, expected):
        return exc
    return ToolFailure(
        f"{raw!r} changed while it was written: {name!r} was replaced by a symbolic link; nothing was written"
    )


def _existing_mode(directory: int, name: str, raw: str) -> int | None:
    """The permission bits of the regular file `name` in `directory`, None when there is none."""
    try:
        found = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(found.st_mode):
        raise ToolFailure(f"{raw!r} changed while it was written: it became a symbolic link; nothing was written")
    if not stat.S_ISREG(found.st_mode):
        raise ToolFailure(f"{raw!r} exists and is not a regular file")
    return stat.S_IMODE(found.st_mode)


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


def _atomic_write(directory: int, name: str, data: bytes) -> None:
    """`data` as the file `name` in `directory`, or the file as it was: a temporary file made in that same
    directory (`temporary_name`), fsync, then `os.replace` there; a replaced file keeps its mode."""
    mode = _existing_mode(directory, name, name)
    temporary = temporary_name(name)
    # 0o666 with O_EXCL: the umask applies as for any new file, and an existing path is never followed.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temporary, flags, 0o666, dir_fd=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary, dir_fd=directory)
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
