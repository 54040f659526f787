"""Built-in workspace tools: `read_file`, `list_dir` and `search_text`, confined to the workspace,
and the registration of the tools that change things (`writes.py`, `command.py`), off by default.

Every path argument is relative to the workspace root (an absolute path inside it is accepted too).
A path is judged by where it really leads (`workspace.py`): it is resolved, following `..` and
symlinks at every component, and a path whose target lies outside the root is refused with an error
result naming it, never clamped. Blocking file I/O runs in a worker thread that is abandoned on cancellation,
so a cancelled turn does not wait for a slow disk or a long search. A small `read_file` or `list_dir` (a file of
at most `INLINE_READ_BYTES`, a directory of at most `INLINE_LIST_ENTRIES` entries and no symlink, a path of at
most `INLINE_DEPTH` components below the root with no symlink or `..` in it) runs on the event loop instead: its
work is a few system calls, while the hop to a worker thread and back cost about 0.6 ms of a 3.5 ms turn on a
2-core machine (`bench/runtime_hops.py`). Whether a call is small is found out as it runs, within those bounds;
one that is not is started over in a worker thread. No symlink, since resolving one could wait on wherever it
leads (a hung network mount).

`search_text` patterns come from the model, and a file the agent reads can plant one, so a match must
never hold the process: patterns run on the `regex` package, which releases the GIL while it matches
(other requests are answered meanwhile) and stops a match at a deadline. One search has
`search_timeout_s` in all; past it the model gets an error result naming the limit. Each line is
matched in its first `SEARCH_LINE_MAX_CHARS` characters only, so one huge line cannot dominate.
Compiling is bounded too (`patterns.py`: pattern length, counted repeats).
"""

import base64
import contextlib
import fnmatch
import functools
import io
import itertools
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import anyio.to_thread
from pydantic import Field

from agent_server.errors import ToolFailure
from agent_server.settings import ToolsOptions
from agent_server.tools.arguments import ToolArguments, input_schema, parse_arguments
from agent_server.tools.base import ProgressCallback, Screening, error_result, unknown_tool
from agent_server.tools.workspace import PATH_HELP, Output, WorkspacePaths
from agent_server.types import (
    ContentPart,
    ImagePart,
    TextPart,
    ToolAnnotations,
    ToolCall,
    ToolKind,
    ToolResult,
    ToolSpec,
)

if TYPE_CHECKING:
    import regex

    from agent_server.tools.instructions import InstructionLookup
    from agent_server.tools.sandbox import CommandSandbox
    from agent_server.tools.skills import SkillSources
    from agent_server.tools.writes import FileWriter

logger = logging.getLogger(__name__)

SKIP_DIRS = frozenset({".git", ".agent_server", "node_modules", ".venv"})
"""Directories `search_text` never descends into."""
LIST_DIR_MAX_ENTRIES = 1000
MATCH_LINE_MAX_CHARS = 300
"""A matching line longer than this is cut in `search_text` output."""
SEARCH_LINE_MAX_CHARS = 10_000
"""`search_text` matches each line in its first this many characters."""
SEARCH_TIMEOUT_S = 10.0
"""Default time limit of one `search_text` (all its matching), in seconds."""
INLINE_READ_BYTES = 16 * 1024
"""A `read_file` of a file at most this large runs on the event loop (see the module docstring)."""
INLINE_LIST_ENTRIES = 32
"""A `list_dir` of a directory of at most this many entries runs on the event loop."""
INLINE_DEPTH = 4
"""Only for a path of at most this many components below the root (`a/b/c.txt` has 3): the call's instruction-file
lookup reads each directory's file on the way (`InstructionLookup`, each within `instructions_max_bytes`)."""
_SNIFF_BYTES = 8192
_CHUNK = 64 * 1024
_IMAGE_MAGIC = {
    b"\x89PNG\r\n\x1a\n": "image/png",
    b"\xff\xd8\xff": "image/jpeg",
    b"GIF87a": "image/gif",
    b"GIF89a": "image/gif",
}


class ReadFileArguments(ToolArguments):
    path: str = Field(description=PATH_HELP)
    offset: int = Field(1, ge=1, description="First line to return (1-based); default 1.")
    limit: int | None = Field(None, ge=1, description="Maximum number of lines to return; default all.")


class ListDirArguments(ToolArguments):
    path: str = Field(".", description=PATH_HELP)


class SearchTextArguments(ToolArguments):
    pattern: str = Field(description="Python regular expression (re module syntax), matched per line.")
    path: str = Field(".", description="File or directory to search. " + PATH_HELP)
    glob: str | None = Field(None, description="Only search files whose name or relative path matches, e.g. '*.py'.")


ARGUMENTS: dict[str, type[ToolArguments]] = {
    "read_file": ReadFileArguments,
    "list_dir": ListDirArguments,
    "search_text": SearchTextArguments,
}
"""Each tool's arguments: the schema in `SPECS` and the validation of a call both come from these."""
_DESCRIPTIONS = {
    "read_file": (
        "Read a text file from the workspace and return its exact text (no line numbers). "
        "Use offset/limit to read part of a large file; output beyond the size limit is cut with a "
        "note. PNG, JPEG, GIF and WebP images are returned as images. Other binary files are refused."
    ),
    "list_dir": (
        "List a workspace directory: entries sorted by name, directories marked with a trailing '/', "
        "files with their size in bytes."
    ),
    "search_text": (
        "Search text files under a workspace path (recursively) for a Python regular expression, "
        "line by line (each line in its first 10000 characters). Returns 'path:LINE: text' lines. Skips "
        ".git, .agent_server, node_modules, .venv, binary files and files over the size limit. A search "
        "has a time limit: avoid patterns that backtrack heavily, such as nested repeats."
    ),
}
_KINDS: dict[str, ToolKind] = {"read_file": "read", "list_dir": "read", "search_text": "search"}
_READ_ONLY = ToolAnnotations(read_only=True, destructive=False, idempotent=True, open_world=False)
SPECS: dict[str, ToolSpec] = {
    name: ToolSpec(
        name=name,
        description=description,
        input_schema=input_schema(ARGUMENTS[name]),
        annotations=_READ_ONLY,
        kind=_KINDS[name],
    )
    for name, description in _DESCRIPTIONS.items()
}
"""The read tools, always offered; `writes.SPECS` and `command.command_spec` are the others."""


@dataclass(frozen=True)
class _Tool:
    """One offered tool: what the model sees, how its arguments are checked, and what runs it."""

    spec: ToolSpec
    arguments: type[ToolArguments]
    blocking: Callable[[Any], Output] | None = None
    """Takes an instance of `arguments` (Any: each tool has its own model); run in a worker thread, abandoned on
    cancellation (the turn does not wait for it)."""
    run: Callable[[Any], Awaitable[Output]] | None = None
    """The same, for a tool that runs on the event loop (`run_command` waits for its process there)."""
    inline: Callable[[Any], Output] | None = None
    """`blocking` for a small call, tried on the event loop first: raises `_TooLargeInline` past its bounds."""


class _TooLargeInline(Exception):
    """The call is larger than the event loop may take on (the module docstring): run it in a worker thread."""


class WorkspaceToolset:
    """The built-in tools over one workspace root. Implements `Toolset`.

    The read tools are always offered; `write_file`/`edit_file` (`writes.py`) when `options.write` is
    on, `run_command` (`command.py`) when `options.exec` is on. A tool that is off is not listed, and a
    call of it is answered as an unknown tool.
    """

    def __init__(
        self,
        workspace: Path,
        *,
        read_max_bytes: int,
        search_max_matches: int,
        search_timeout_s: float = SEARCH_TIMEOUT_S,
        options: ToolsOptions | None = None,
        state_dir: Path | None = None,
        environ: Mapping[str, str] | None = None,
        sandbox: "CommandSandbox | None" = None,
        protected: Sequence[Path] = (),
        skills: "SkillSources | None" = None,
        instructions: "InstructionLookup | None" = None,
    ) -> None:
        """`state_dir` and `protected` (the server's own config files) are protected paths of the write tools,
        beyond `options.protected_paths`; `environ` is where `run_command`'s minimal one comes from; `sandbox` is
        where its commands run (one of the runtime's, shared by its workspaces; default: one made from `options`,
        hiding `state_dir`); `skills`: where `load_skill` finds skills (None: no `load_skill`), whose library folders
        `read_file` and `list_dir` may read; `instructions`: the subdirectory instruction files each call's
        result notes (None: none looked up)."""
        options = options or ToolsOptions()
        self._paths = WorkspacePaths(workspace, () if skills is None else skills.dirs)
        self._skills = skills
        self._instructions = instructions
        self._read_max = read_max_bytes
        self._max_matches = search_max_matches
        self._search_timeout_s = search_timeout_s
        reads: dict[str, Callable[[Any], Output]] = {
            "read_file": self._read_file,
            "list_dir": self._list_dir,
            "search_text": self._search_text,
        }
        small: dict[str, Callable[[Any], Output]] = {
            "read_file": functools.partial(self._read_file, inline=True),
            "list_dir": functools.partial(self._list_dir, inline=True),
        }
        self._tools = {
            name: _Tool(SPECS[name], ARGUMENTS[name], run, inline=small.get(name)) for name, run in reads.items()
        }
        if skills is not None:
            from agent_server.tools.guidance import LOAD_SKILL_SPEC, LoadSkillArguments, load_skill

            run = functools.partial(load_skill, skills)
            self._tools["load_skill"] = _Tool(LOAD_SKILL_SPEC, LoadSkillArguments, run)
        self._writer: FileWriter | None = None
        if options.write:
            always = [path for path in (state_dir, *protected) if path is not None]
            self._tools.update(self._write_tools(options, always))
        if options.exec:
            environ = os.environ if environ is None else environ
            if sandbox is None:
                from agent_server.tools.sandbox import CommandSandbox

                hidden = [] if state_dir is None else [state_dir]
                sandbox = CommandSandbox.from_options(options, hidden=hidden, environ=environ)
            self._tools.update(self._command_tools(options, environ, sandbox))

    def _write_tools(self, options: ToolsOptions, always: list[Path]) -> dict[str, _Tool]:
        # Imported only when enabled: most servers never offer them, and every import is start-up time.
        from agent_server.tools.protected import ProtectedPaths
        from agent_server.tools.writes import ARGUMENTS as WRITE_ARGUMENTS
        from agent_server.tools.writes import SPECS as WRITE_SPECS
        from agent_server.tools.writes import FileWriter

        entries = [*options.protected_paths, *(str(path) for path in always)]
        writer = FileWriter(
            self._paths,
            protected=ProtectedPaths(self._paths.root, entries, options.protected_ask),
            edit_max_bytes=options.edit_max_bytes,
            write_max_bytes=options.write_max_bytes,
        )
        self._writer = writer
        runs = {"write_file": writer.write_file, "edit_file": writer.edit_file}
        return {name: _Tool(WRITE_SPECS[name], WRITE_ARGUMENTS[name], run) for name, run in runs.items()}

    def _command_tools(
        self, options: ToolsOptions, environ: Mapping[str, str], sandbox: "CommandSandbox"
    ) -> dict[str, _Tool]:
        from agent_server.tools.command import CommandRunner, RunCommandArguments

        runner = CommandRunner(
            self._paths,
            environ=environ,
            sandbox=sandbox,
            timeout_s=options.command_timeout_s,
            output_max_bytes=options.command_output_max_bytes,
        )
        return {"run_command": _Tool(runner.spec, RunCommandArguments, run=runner.run_command)}

    async def list_tools(self) -> list[ToolSpec]:
        """The tools on; `load_skill` only while a place for skills exists (a few `stat` calls)."""
        skills = self._skills
        if skills is None or skills.any_place():
            return [tool.spec for tool in self._tools.values()]
        return [tool.spec for name, tool in self._tools.items() if name != "load_skill"]

    async def screen(self, call: ToolCall) -> Screening | None:
        """The write tools' word on a call before it is approved (`tools.base.ScreensCalls`): protected paths
        and the size limit; None for every other tool."""
        writer = self._writer
        if writer is None or call.name not in ("write_file", "edit_file"):
            return None
        return await anyio.to_thread.run_sync(writer.screen, call.name, call.arguments, abandon_on_cancel=True)

    async def call_tool(self, call: ToolCall, *, on_progress: ProgressCallback | None = None) -> ToolResult:
        tool = self._tools.get(call.name)
        if tool is None:
            return unknown_tool(call)
        try:
            args = parse_arguments(call.name, tool.arguments, call.arguments)
            if tool.inline is not None:
                with contextlib.suppress(_TooLargeInline):
                    return self._blocking(tool.inline, call, args)
            if tool.blocking is not None:
                return await anyio.to_thread.run_sync(self._blocking, tool.blocking, call, args, abandon_on_cancel=True)
            assert tool.run is not None
            content, structured = await tool.run(args)
        except ToolFailure as exc:
            return error_result(call, exc.message)
        except OSError as exc:
            return error_result(call, f"{call.name} failed: {self._paths.describe_os_error(exc)}")
        return ToolResult(call_id=call.id, name=call.name, content=content, structured=structured)

    def _blocking(self, run: Callable[[Any], Output], call: ToolCall, args: Any) -> ToolResult:
        """`run`'s result and, in the same worker thread (one hop, not two; or on the loop, for a small call), the
        instruction files of the subdirectories down to the path it touched (`InstructionLookup`)."""
        content, structured = run(args)
        result = ToolResult(call_id=call.id, name=call.name, content=content, structured=structured)
        return result if self._instructions is None else result.noting(self._instructions.after(result))

    def _read_file(self, args: ReadFileArguments, *, inline: bool = False) -> Output:
        raw = args.path
        path = self._resolve(raw, inline)
        size = _regular_file_size(raw, path)
        if inline and size > INLINE_READ_BYTES:
            raise _TooLargeInline
        base: dict[str, Any] = {"path": self._paths.shown(path), "size": size}
        with _opened(path, inline) as handle:
            head = handle.read(_SNIFF_BYTES)
            mime = _sniff_image(head)
            if mime is not None:
                return self._image_output(raw, handle, base, mime)
            handle.seek(0)
            offset = args.offset
            skipped = _skip_lines(handle, offset - 1)
            data, lines, truncated = _take_lines(handle, args.limit, self._read_max)
        if b"\x00" in head or b"\x00" in data:
            raise ToolFailure(f"{raw!r} is a binary file ({size} bytes); read_file reads text and images only")
        if offset > 1 and lines == 0:
            raise ToolFailure(f"offset {offset} is past the end of {raw!r}, which has {skipped} lines")
        content: list[ContentPart] = [TextPart(text=data.decode("utf-8", errors="replace"))]
        if size == 0:
            content = [TextPart(text="[file is empty]")]
        if truncated:
            content.append(TextPart(text=f"[truncated: file is {size} bytes; read with offset/limit]"))
        return content, {**base, "lines_returned": lines, "truncated": truncated}

    def _image_output(self, raw: str, handle: BinaryIO, base: dict[str, Any], mime: str) -> Output:
        size: int = base["size"]
        if size > self._read_max:
            raise ToolFailure(f"image {raw!r} is {size} bytes, over the read limit of {self._read_max} bytes")
        handle.seek(0)
        data = handle.read(self._read_max + 1)
        content: list[ContentPart] = [
            TextPart(text=f"Image {base['path']} ({mime}, {size} bytes)"),
            ImagePart(data=base64.b64encode(data).decode("ascii"), mime_type=mime),
        ]
        return content, {**base, "lines_returned": 0, "truncated": False, "mime_type": mime}

    def _list_dir(self, args: ListDirArguments, *, inline: bool = False) -> Output:
        raw = args.path
        path = self._resolve(raw, inline)
        if not path.exists():
            raise ToolFailure(f"directory not found: {raw!r}")
        if not path.is_dir():
            raise ToolFailure(f"{raw!r} is not a directory; use read_file to read a file")
        with os.scandir(path) as scan:
            taken = list(itertools.islice(scan, INLINE_LIST_ENTRIES + 1)) if inline else list(scan)
        if inline and (len(taken) > INLINE_LIST_ENTRIES or any(entry.is_symlink() for entry in taken)):
            raise _TooLargeInline  # a symlink is described by resolving it: the worker thread's work
        found = sorted(taken, key=lambda entry: entry.name)
        entries = [self._describe_entry(entry) for entry in found[:LIST_DIR_MAX_ENTRIES]]
        lines = [_entry_line(entry) for entry in entries]
        if not found:
            lines.append("[empty directory]")
        if len(found) > LIST_DIR_MAX_ENTRIES:
            lines.append(f"[showing the first {LIST_DIR_MAX_ENTRIES} of {len(found)} entries]")
        structured = {
            "path": self._paths.shown(path),
            "entries": entries,
            "truncated": len(found) > LIST_DIR_MAX_ENTRIES,
        }
        return [TextPart(text="\n".join(lines))], structured

    def _resolve(self, raw: str, inline: bool) -> Path:
        """`raw` resolved for reading; `_TooLargeInline` when `inline` and the event loop may not resolve it."""
        if not inline:
            return self._paths.resolve_readable(raw)
        path = self._plain_path(raw)
        if path is None:
            raise _TooLargeInline
        return path

    def _plain_path(self, raw: str) -> Path | None:
        """The real path of `raw` when the event loop may resolve it, else None: at most `INLINE_DEPTH` components
        inside the root, no `..`, no symlink on the way, the root's own included (resolving one could wait on
        wherever it leads: a hung network mount). One `lstat` a component, which never follows a link; with no
        link and no `..` the path as written is its real path."""
        root = self._paths.root
        candidate = Path(raw)
        if candidate.is_absolute():
            if not candidate.is_relative_to(root):
                return None
            candidate = candidate.relative_to(root)
        if "\x00" in raw or len(candidate.parts) > INLINE_DEPTH or ".." in candidate.parts:
            return None
        path = root.joinpath(*candidate.parts)
        for step in itertools.accumulate(candidate.parts, lambda parent, part: parent / part, initial=root):
            try:
                info = os.lstat(step)
            except FileNotFoundError:
                return path  # nothing further to follow: the call reports it
            except OSError:
                return None
            if stat.S_ISLNK(info.st_mode):
                return None
        return path

    def _describe_entry(self, entry: os.DirEntry[str]) -> dict[str, Any]:
        """Type and size of one entry; a symlink is described by its target when that is inside."""
        described: dict[str, Any] = {"name": entry.name, "type": "symlink", "size": None}
        try:
            if entry.is_symlink():
                target = Path(entry.path).resolve()
                if not target.is_relative_to(self._paths.root) or not target.exists():
                    return described
                info = target.stat()
            else:
                info = entry.stat(follow_symlinks=False)
        except (OSError, RuntimeError):
            return {**described, "type": "other"}
        if stat.S_ISDIR(info.st_mode):
            return {**described, "type": "dir"}
        if stat.S_ISREG(info.st_mode):
            return {**described, "type": "file", "size": info.st_size}
        return {**described, "type": "other"}

    def _search_text(self, args: SearchTextArguments) -> Output:
        from agent_server.tools.patterns import compile_pattern  # the `regex` package: 6 ms, only for searches

        pattern = args.pattern
        compiled = compile_pattern(pattern)
        raw = args.path
        root = self._paths.resolve(raw)
        if not root.exists():
            raise ToolFailure(f"path not found: {raw!r}")
        glob = args.glob
        found = list(itertools.islice(self._matches(compiled, root, glob), self._max_matches + 1))
        capped = len(found) > self._max_matches
        found = found[: self._max_matches]
        lines = [f"{rel}:{number}: {_clip(text)}" for rel, number, text in found]
        if not found:
            lines.append(f"no matches for {pattern!r} in {raw!r}" + (f" (glob {glob!r})" if glob else ""))
        if capped:
            lines.append(f"[capped at {self._max_matches} matches; narrow the pattern, path or glob]")
        matches = [{"path": rel, "line": number, "text": _clip(text)} for rel, number, text in found]
        structured = {"pattern": pattern, "path": self._paths.rel(root), "matches": matches, "truncated": capped}
        return [TextPart(text="\n".join(lines))], structured

    def _matches(self, compiled: "regex.Pattern[str]", root: Path, glob: str | None) -> Iterator[tuple[str, int, str]]:
        import anyio.from_thread  # here: only a search needs it (1-2 ms of the first turn's imports otherwise)

        deadline = time.monotonic() + self._search_timeout_s
        for shown, real in self._walk(root):
            anyio.from_thread.check_cancelled()  # an abandoned search stops at the next file
            rel = self._paths.rel(shown)
            if glob is not None and not _glob_matches(glob, rel, shown.relative_to(root).as_posix()):
                continue
            for number, line in enumerate(self._searchable_lines(real), start=1):
                if self._search_line(compiled, line, deadline, f"{rel}:{number}"):
                    yield rel, number, line

    def _search_line(self, compiled: "regex.Pattern[str]", line: str, deadline: float, where: str) -> bool:
        """Whether the line matches; ToolFailure naming the limit once the search's deadline passes."""
        try:
            # concurrent=True: the GIL is released while matching, so the event loop keeps serving.
            found = compiled.search(
                line[:SEARCH_LINE_MAX_CHARS], timeout=max(deadline - time.monotonic(), 0.0), concurrent=True
            )
        except TimeoutError:
            raise ToolFailure(
                f"search_text stopped at {where}: matching {compiled.pattern!r} took longer than the "
                f"{self._search_timeout_s:g} s limit of one search. Simplify the pattern (nested or repeated "
                "groups such as (.*,){20} backtrack exponentially) or narrow the path or glob."
            ) from None
        return found is not None

    def _walk(self, root: Path) -> Iterator[tuple[Path, Path]]:
        """`(path as listed, real path)` of each file under root, in sorted order; symlinked dirs not followed."""
        if not root.is_dir():
            yield root, root
            return
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(name for name in dirnames if name not in SKIP_DIRS)
            for name in sorted(filenames):
                shown = Path(dirpath, name)
                try:
                    real = shown.resolve() if shown.is_symlink() else shown
                except (OSError, RuntimeError):  # a symlink loop
                    continue
                if real.is_relative_to(self._paths.root):
                    yield shown, real

    def _searchable_lines(self, path: Path) -> list[str]:
        """The file's lines, or none for a file to skip (special, too large, binary, unreadable)."""
        try:
            info = path.stat()
            if not stat.S_ISREG(info.st_mode) or info.st_size > self._read_max:
                return []
            data = path.read_bytes()
        except OSError as exc:
            logger.debug("search_text skips %s: %s", path, exc)
            return []
        if b"\x00" in data[:_SNIFF_BYTES]:
            return []
        lines = data.decode("utf-8", errors="replace").split("\n")  # as read_file counts, unlike splitlines()
        if lines[-1] == "":
            lines.pop()
        return [line.removesuffix("\r") for line in lines]


# --- helpers ---------------------------------------------------------------------------------


def _opened(path: Path, inline: bool) -> BinaryIO:
    """`path` opened for reading. On the event loop (`inline`): the whole file in memory, opened so that `open`
    never waits (even for a FIFO swapped in since the size was checked), and only a regular file that holds at most
    `INLINE_READ_BYTES` (whatever its size said), else `_TooLargeInline` (the worker thread then checks and
    reports as usual)."""
    if not inline:
        return path.open("rb")
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise _TooLargeInline
        data = handle.read(INLINE_READ_BYTES + 1)
    if len(data) > INLINE_READ_BYTES:
        raise _TooLargeInline
    return io.BytesIO(data)


def _regular_file_size(raw: str, path: Path) -> int:
    if not path.exists():
        raise ToolFailure(f"file not found: {raw!r}")
    info = path.stat()
    if stat.S_ISDIR(info.st_mode):
        raise ToolFailure(f"{raw!r} is a directory; use list_dir to list it")
    if not stat.S_ISREG(info.st_mode):
        raise ToolFailure(f"{raw!r} is not a regular file")
    return info.st_size


def _sniff_image(head: bytes) -> str | None:
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return next((mime for magic, mime in _IMAGE_MAGIC.items() if head.startswith(magic)), None)


def _skip_lines(handle: BinaryIO, count: int) -> int:
    """Skip `count` lines, reading in bounded chunks; returns how many lines there were to skip."""
    skipped = 0
    in_line = False
    while skipped < count:
        chunk = handle.readline(_CHUNK)
        if not chunk:
            return skipped + int(in_line)  # a last line without a newline
        in_line = not chunk.endswith(b"\n")
        skipped += int(not in_line)
    return skipped


def _take_lines(handle: BinaryIO, limit: int | None, max_bytes: int) -> tuple[bytes, int, bool]:
    """Up to `limit` lines and at most `max_bytes` bytes: `(data, lines, truncated by the byte cap)`. One read of
    at most `max_bytes + 1` and the line counting in C (`bytes.split`, `bytes.count`), not a `readline` a line."""
    data = handle.read(max_bytes + 1)
    more = len(data) > max_bytes  # the file goes on past the cap
    window = data[:max_bytes]
    if limit is not None:
        parts = window.split(b"\n", limit)
        if len(parts) > limit:  # `limit` whole lines within the cap
            return b"\n".join(parts[:limit]) + b"\n", limit, False
    lines = window.count(b"\n") + int(bool(window) and not window.endswith(b"\n"))
    return window, lines, more


_ENTRY_SUFFIX = {"dir": "/", "symlink": "@ (symlink leading outside the workspace, or broken)", "other": " (special)"}


def _entry_line(entry: dict[str, Any]) -> str:
    if entry["type"] == "file":
        return f"{entry['name']} ({entry['size']} bytes)"
    return entry["name"] + _ENTRY_SUFFIX[entry["type"]]


def _glob_matches(glob: str, *paths: str) -> bool:
    """Match the file name and the given relative paths; a leading `**/` also matches at the top."""
    patterns = [glob, glob[3:]] if glob.startswith("**/") else [glob]
    candidates = [paths[0].rsplit("/", 1)[-1], *paths]
    return any(fnmatch.fnmatchcase(candidate, pattern) for pattern in patterns for candidate in candidates)


def _clip(line: str) -> str:
    return line if len(line) <= MATCH_LINE_MAX_CHARS else line[:MATCH_LINE_MAX_CHARS] + "…"
