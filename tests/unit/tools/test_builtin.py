"""The built-in workspace tools: results, limits and confinement to the workspace."""

from __future__ import annotations

import base64
import os
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from agent_server.tools.builtin import (
    INLINE_DEPTH,
    INLINE_LIST_ENTRIES,
    INLINE_READ_BYTES,
    LIST_DIR_MAX_ENTRIES,
    WorkspaceToolset,
)
from agent_server.tools.builtin import SPECS as READ_TOOLS
from agent_server.types import ImagePart, TextPart, ToolCall, ToolResult

pytestmark = pytest.mark.anyio

READ_MAX = 1000
MAX_MATCHES = 5
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("import os\n\ndef hello():\n    return 'hello'\n")
    (root / "src" / "notes.txt").write_text("hello notes\n")
    (root / "README.md").write_text("# Title\nhello world\nbye\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("hello secret\n")
    return root


@pytest.fixture
def tools(ws: Path) -> WorkspaceToolset:
    return WorkspaceToolset(ws, read_max_bytes=READ_MAX, search_max_matches=MAX_MATCHES)


async def call(tools: WorkspaceToolset, name: str, **arguments: Any) -> ToolResult:
    return await tools.call_tool(ToolCall(id="call_1", name=name, arguments=arguments))


def ok(result: ToolResult) -> ToolResult:
    assert not result.is_error and result.call_id == "call_1", result.text()
    return result


def failed(result: ToolResult, *fragments: str) -> str:
    assert result.is_error and result.structured is None, result.text()
    for fragment in fragments:
        assert fragment in result.text()
    return result.text()


async def test_specs_are_builtin_with_strict_schemas(tools: WorkspaceToolset) -> None:
    specs = {spec.name: spec for spec in await tools.list_tools()}
    assert set(specs) == set(READ_TOOLS)
    for spec in specs.values():
        assert spec.source == "builtin"
        assert spec.description
        assert spec.input_schema["additionalProperties"] is False
    assert specs["read_file"].input_schema["required"] == ["path"]
    assert specs["search_text"].input_schema["required"] == ["pattern"]
    assert specs["list_dir"].input_schema["required"] == []


# --- read_file -------------------------------------------------------------------------------


async def test_read_file_returns_exact_text(tools: WorkspaceToolset) -> None:
    result = ok(await call(tools, "read_file", path="README.md"))
    assert result.content == [TextPart(text="# Title\nhello world\nbye\n")]
    assert result.structured == {"path": "README.md", "size": 24, "lines_returned": 3, "truncated": False}


@pytest.mark.parametrize(
    ("window", "expected", "lines"),
    [
        ({"offset": 2}, "hello world\nbye\n", 2),
        ({"limit": 1}, "# Title\n", 1),
        ({"offset": 2, "limit": 1}, "hello world\n", 1),
        ({"offset": 3, "limit": 10}, "bye\n", 1),
        ({"offset": None, "limit": None}, "# Title\nhello world\nbye\n", 3),
    ],
)
async def test_read_file_offset_and_limit(
    tools: WorkspaceToolset, window: dict[str, Any], expected: str, lines: int
) -> None:
    result = ok(await call(tools, "read_file", path="README.md", **window))
    assert result.text() == expected
    assert result.structured is not None and result.structured["lines_returned"] == lines


async def test_read_file_last_line_without_newline_and_offset_past_end(ws: Path, tools: WorkspaceToolset) -> None:
    (ws / "two.txt").write_text("a\nb")
    assert ok(await call(tools, "read_file", path="two.txt", offset=2)).text() == "b"
    failed(await call(tools, "read_file", path="two.txt", offset=3), "offset 3 is past the end", "2 lines")


async def test_read_file_absolute_path_inside_and_empty_file(ws: Path, tools: WorkspaceToolset) -> None:
    assert ok(await call(tools, "read_file", path=str(ws / "src" / "notes.txt"))).text() == "hello notes\n"
    (ws / "empty.txt").write_bytes(b"")
    result = ok(await call(tools, "read_file", path="empty.txt"))
    assert result.text() == "[file is empty]"
    assert result.structured == {"path": "empty.txt", "size": 0, "lines_returned": 0, "truncated": False}


async def test_read_file_over_the_limit_is_truncated_with_a_note(ws: Path, tools: WorkspaceToolset) -> None:
    body = "".join(f"line {n:04}\n" for n in range(300))  # 10 bytes a line, 3000 bytes
    (ws / "big.txt").write_text(body)
    result = ok(await call(tools, "read_file", path="big.txt"))
    text_part, note = result.content
    assert isinstance(text_part, TextPart) and text_part.text == body[:READ_MAX]
    assert note == TextPart(text="[truncated: file is 3000 bytes; read with offset/limit]")
    assert result.structured == {"path": "big.txt", "size": 3000, "lines_returned": 100, "truncated": True}
    later = ok(await call(tools, "read_file", path="big.txt", offset=251, limit=5))
    assert later.text() == "".join(f"line {n:04}\n" for n in range(250, 255))
    assert later.structured is not None and later.structured["truncated"] is False


async def test_read_file_single_huge_line_is_cut_at_the_limit(ws: Path, tools: WorkspaceToolset) -> None:
    (ws / "min.js").write_text("x" * 5000)
    result = ok(await call(tools, "read_file", path="min.js"))
    assert result.content[0] == TextPart(text="x" * READ_MAX)
    assert result.structured == {"path": "min.js", "size": 5000, "lines_returned": 1, "truncated": True}


@pytest.mark.parametrize(
    ("name", "data", "mime"),
    [
        ("pic.png", PNG, "image/png"),
        ("photo.jpg", b"\xff\xd8\xff\xe0" + bytes(20), "image/jpeg"),
        ("anim.gif", b"GIF89a" + bytes(20), "image/gif"),
        ("pic.webp", b"RIFF\x10\x00\x00\x00WEBPVP8 " + bytes(8), "image/webp"),
        ("misnamed.txt", PNG, "image/png"),
    ],
)
async def test_read_file_image_comes_back_as_image(
    ws: Path, tools: WorkspaceToolset, name: str, data: bytes, mime: str
) -> None:
    (ws / name).write_bytes(data)
    result = ok(await call(tools, "read_file", path=name))
    label, image = result.content
    assert isinstance(label, TextPart) and mime in label.text
    assert isinstance(image, ImagePart) and image.mime_type == mime
    assert base64.b64decode(image.data) == data
    expected = {"path": name, "size": len(data), "lines_returned": 0, "truncated": False, "mime_type": mime}
    assert result.structured == expected


async def test_read_file_image_over_the_limit_is_an_error(ws: Path, tools: WorkspaceToolset) -> None:
    (ws / "huge.png").write_bytes(PNG + bytes(READ_MAX))
    failed(await call(tools, "read_file", path="huge.png"), "'huge.png'", "over the read limit")


async def test_read_file_binary_is_an_error(ws: Path, tools: WorkspaceToolset) -> None:
    (ws / "blob.bin").write_bytes(b"\x7fELF\x00\x01\x02" + bytes(50))
    failed(await call(tools, "read_file", path="blob.bin"), "'blob.bin' is a binary file")


async def test_read_file_missing_and_directory(tools: WorkspaceToolset) -> None:
    failed(await call(tools, "read_file", path="nope.txt"), "file not found: 'nope.txt'")
    failed(await call(tools, "read_file", path="src"), "'src' is a directory", "list_dir")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
async def test_read_file_special_file_is_an_error_not_a_hang(ws: Path, tools: WorkspaceToolset) -> None:
    os.mkfifo(ws / "pipe")
    failed(await call(tools, "read_file", path="pipe"), "'pipe' is not a regular file")


# --- argument checks ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "fragment"),
    [
        ("read_file", {}, "missing the required argument 'path'"),
        ("read_file", {"path": None}, "missing the required argument 'path'"),
        ("read_file", {"path": 3}, "'path' must be a string, got int"),
        ("read_file", {"path": "README.md", "offset": -1}, "'offset' must be at least 1, got -1"),
        ("read_file", {"path": "README.md", "offset": 0}, "'offset' must be at least 1, got 0"),
        ("read_file", {"path": "README.md", "limit": "10"}, "'limit' must be an integer, got str"),
        ("read_file", {"path": "README.md", "offset": True}, "'offset' must be an integer, got bool"),
        ("read_file", {"path": "README.md", "encoding": "utf-8"}, "unknown argument(s) encoding"),
        ("list_dir", {"path": ["src"]}, "'path' must be a string, got list"),
        ("search_text", {"path": "."}, "missing the required argument 'pattern'"),
        ("write_file", {"path": "x"}, "unknown tool 'write_file'"),
    ],
)
async def test_bad_arguments_and_unknown_tools_are_error_results(
    tools: WorkspaceToolset, name: str, arguments: dict[str, Any], fragment: str
) -> None:
    failed(await tools.call_tool(ToolCall(id="call_1", name=name, arguments=arguments)), fragment)


# --- confinement -------------------------------------------------------------------------------


@pytest.fixture
def escapes(ws: Path) -> dict[str, str]:
    """Paths into `outside/`, one per way of leaving the workspace."""
    outside = ws.parent / "outside"
    (ws / "link_file").symlink_to(outside / "secret.txt")
    (ws / "link_dir").symlink_to(outside, target_is_directory=True)
    (ws / "src" / "deep_link").symlink_to(ws.parent)
    return {
        "dotdot": "../outside/secret.txt",
        "dotdot_inside_path": "src/../../outside/secret.txt",
        "absolute": str(outside / "secret.txt"),
        "symlink_file": "link_file",
        "symlink_dir": "link_dir/secret.txt",
        "symlink_mid_path": "src/deep_link/outside/secret.txt",
    }


ESCAPES = ["dotdot", "dotdot_inside_path", "absolute", "symlink_file", "symlink_dir", "symlink_mid_path"]


@pytest.mark.parametrize("kind", ESCAPES)
async def test_read_file_refuses_every_escape(tools: WorkspaceToolset, escapes: dict[str, str], kind: str) -> None:
    path = escapes[kind]
    text = failed(await call(tools, "read_file", path=path), f"path {path!r} is outside the workspace")
    assert "hello secret" not in text


@pytest.mark.parametrize("kind", ESCAPES)
async def test_search_and_list_refuse_every_escape(tools: WorkspaceToolset, escapes: dict[str, str], kind: str) -> None:
    path = escapes[kind]
    failed(await call(tools, "search_text", pattern="hello", path=path), f"path {path!r} is outside the workspace")
    directory = path.rsplit("/", 1)[0] if "/" in path else path
    failed(await call(tools, "list_dir", path=directory), "is outside the workspace")


async def test_parent_of_workspace_is_outside(tools: WorkspaceToolset) -> None:
    failed(await call(tools, "list_dir", path=".."), "path '..' is outside the workspace")
    failed(await call(tools, "list_dir", path="/"), "path '/' is outside the workspace")


async def test_symlinks_inside_pointing_inside_are_fine(ws: Path, tools: WorkspaceToolset) -> None:
    (ws / "readme_link").symlink_to(ws / "README.md")
    (ws / "pkg_link").symlink_to(ws / "src" / "pkg", target_is_directory=True)
    assert ok(await call(tools, "read_file", path="readme_link")).text().startswith("# Title")
    assert "hello" in ok(await call(tools, "read_file", path="pkg_link/mod.py")).text()
    assert "mod.py" in ok(await call(tools, "list_dir", path="pkg_link")).text()
    assert "pkg/mod.py:3: def hello():" in ok(await call(tools, "search_text", pattern="def", path="pkg_link")).text()


async def test_dotdot_that_stays_inside_is_fine(tools: WorkspaceToolset) -> None:
    assert ok(await call(tools, "read_file", path="src/pkg/../notes.txt")).text() == "hello notes\n"


async def test_outward_symlinks_are_not_followed_by_list_or_search(
    tools: WorkspaceToolset, escapes: dict[str, str]
) -> None:
    listing = ok(await call(tools, "list_dir"))
    assert listing.structured is not None
    entries = {entry["name"]: entry for entry in listing.structured["entries"]}
    assert entries["link_file"] == {"name": "link_file", "type": "symlink", "size": None}
    assert entries["link_dir"]["type"] == "symlink"
    found = ok(await call(tools, "search_text", pattern="secret"))
    assert "no matches" in found.text()


# --- list_dir ----------------------------------------------------------------------------------


async def test_list_dir_sorted_with_dirs_marked_and_sizes(ws: Path, tools: WorkspaceToolset) -> None:
    result = ok(await call(tools, "list_dir"))
    assert result.text() == "README.md (24 bytes)\nsrc/"
    entries = [{"name": "README.md", "type": "file", "size": 24}, {"name": "src", "type": "dir", "size": None}]
    assert result.structured == {"path": ".", "entries": entries, "truncated": False}
    assert ok(await call(tools, "list_dir", path="src")).text() == "notes.txt (12 bytes)\npkg/"


async def test_list_dir_errors(ws: Path, tools: WorkspaceToolset) -> None:
    failed(await call(tools, "list_dir", path="README.md"), "'README.md' is not a directory")
    failed(await call(tools, "list_dir", path="nowhere"), "directory not found: 'nowhere'")
    (ws / "void").mkdir()
    assert ok(await call(tools, "list_dir", path="void")).text() == "[empty directory]"


async def test_list_dir_caps_entries(ws: Path, tools: WorkspaceToolset) -> None:
    many = ws / "many"
    many.mkdir()
    for n in range(LIST_DIR_MAX_ENTRIES + 5):
        (many / f"f{n:05}").touch()
    result = ok(await call(tools, "list_dir", path="many"))
    assert result.structured is not None and len(result.structured["entries"]) == LIST_DIR_MAX_ENTRIES
    assert result.structured["truncated"] is True
    assert result.text().endswith(f"[showing the first {LIST_DIR_MAX_ENTRIES} of {LIST_DIR_MAX_ENTRIES + 5} entries]")


# --- search_text -------------------------------------------------------------------------------


async def test_search_text_finds_lines_recursively(tools: WorkspaceToolset) -> None:
    result = ok(await call(tools, "search_text", pattern=r"hel+o"))
    assert result.text().splitlines() == [
        "README.md:2: hello world",
        "src/notes.txt:1: hello notes",
        "src/pkg/mod.py:3: def hello():",
        "src/pkg/mod.py:4:     return 'hello'",
    ]
    assert result.structured is not None and result.structured["truncated"] is False
    assert result.structured["matches"][0] == {"path": "README.md", "line": 2, "text": "hello world"}


async def test_search_text_skips_tool_dirs_binaries_and_big_files(ws: Path, tools: WorkspaceToolset) -> None:
    for skipped in (".git", ".agent_server", "node_modules", ".venv"):
        (ws / skipped).mkdir()
        (ws / skipped / "f.txt").write_text("needle\n")
    (ws / "blob.bin").write_bytes(b"needle\x00\x01")
    (ws / "big.txt").write_text("needle\n" * 200)
    (ws / "ok.txt").write_text("a needle\n")
    assert ok(await call(tools, "search_text", pattern="needle")).text() == "ok.txt:1: a needle"


async def test_search_text_glob_and_path(tools: WorkspaceToolset) -> None:
    by_name = ok(await call(tools, "search_text", pattern="hello", glob="*.py"))
    assert by_name.text() == "src/pkg/mod.py:3: def hello():\nsrc/pkg/mod.py:4:     return 'hello'"
    by_path = ok(await call(tools, "search_text", pattern="hello", glob="src/*.txt"))
    assert by_path.text() == "src/notes.txt:1: hello notes"
    assert ok(await call(tools, "search_text", pattern="hello", glob="**/*.md")).text() == "README.md:2: hello world"
    under_search_root = ok(await call(tools, "search_text", pattern="def", path="src", glob="pkg/*.py"))
    assert under_search_root.text() == "src/pkg/mod.py:3: def hello():"
    assert "no matches" in ok(await call(tools, "search_text", pattern="hello", glob="*.rs")).text()
    one_file = ok(await call(tools, "search_text", pattern="bye", path="README.md"))
    assert one_file.text() == "README.md:3: bye"


async def test_search_text_line_numbers_match_read_file(ws: Path, tools: WorkspaceToolset) -> None:
    (ws / "odd.txt").write_bytes(b"form\x0cfeed\r\nsecond\r\nthird needle\r\n")
    assert ok(await call(tools, "search_text", pattern="needle$")).text() == "odd.txt:3: third needle"
    assert ok(await call(tools, "read_file", path="odd.txt", offset=3)).text() == "third needle\r\n"


async def test_search_text_caps_matches_with_a_note(ws: Path, tools: WorkspaceToolset) -> None:
    (ws / "many.txt").write_text("hit\n" * 20)
    result = ok(await call(tools, "search_text", pattern="hit", path="many.txt"))
    lines = result.text().splitlines()
    assert lines[:MAX_MATCHES] == [f"many.txt:{n}: hit" for n in range(1, MAX_MATCHES + 1)]
    assert lines[MAX_MATCHES:] == [f"[capped at {MAX_MATCHES} matches; narrow the pattern, path or glob]"]
    assert result.structured is not None and result.structured["truncated"] is True


async def test_search_text_clips_long_lines_and_reports_no_matches(ws: Path, tools: WorkspaceToolset) -> None:
    (ws / "wide.txt").write_text("needle" + "x" * 500 + "\n")
    text = ok(await call(tools, "search_text", pattern="needle", path="wide.txt")).text()
    assert text.endswith("…") and len(text) < 350
    assert ok(await call(tools, "search_text", pattern="zzz")).text() == "no matches for 'zzz' in '.'"


async def test_search_text_errors(tools: WorkspaceToolset) -> None:
    failed(await call(tools, "search_text", pattern="(unclosed"), "invalid regex '(unclosed'", "missing )")
    failed(await call(tools, "search_text", pattern="x", path="nowhere"), "path not found: 'nowhere'")


# --- cancellation ------------------------------------------------------------------------------


async def test_cancellation_does_not_wait_for_blocked_file_io(
    tools: WorkspaceToolset, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def blocked(path: Path) -> list[str]:
        started.set()
        release.wait()
        finished.set()
        return []

    monkeypatch.setattr(tools, "_searchable_lines", blocked)
    outcome: list[ToolResult] = []

    async def run() -> None:
        outcome.append(await call(tools, "search_text", pattern="x"))

    safety_valve = threading.Timer(5, release.set)  # a call that waited for its thread would end here, and fail
    safety_valve.start()
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await anyio.to_thread.run_sync(started.wait)
            group.cancel_scope.cancel()
        assert not finished.is_set()  # the call returned while its worker thread was still blocked
    finally:
        release.set()
        safety_valve.cancel()
    assert outcome == []


# --- search_text bounds: the pattern comes from the model --------------------------------------

BACKTRACKING = r"(.*?,){20}X"
"""Exponential backtracking for `re` and for `regex` alike, on any line with many commas and no X."""


async def test_a_backtracking_pattern_is_stopped_at_the_time_limit(ws: Path) -> None:
    (ws / "data.csv").write_text(",".join(["field"] * 40) + "\n")
    bounded = WorkspaceToolset(ws, read_max_bytes=READ_MAX, search_max_matches=MAX_MATCHES, search_timeout_s=0.2)
    with anyio.fail_after(10):
        result = await call(bounded, "search_text", pattern=BACKTRACKING)
    failed(result, "search_text stopped at data.csv:1", "longer than the 0.2 s limit", "Simplify the pattern")


async def test_search_text_matches_only_the_head_of_a_huge_line(ws: Path) -> None:
    (ws / "minified.js").write_text("head" + "x" * 20_000 + "tail\n")
    big = WorkspaceToolset(ws, read_max_bytes=100_000, search_max_matches=MAX_MATCHES)
    assert "minified.js:1: headxx" in ok(await call(big, "search_text", pattern="head")).text()
    assert "no matches" in ok(await call(big, "search_text", pattern="tail")).text()


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("a{4294967294}", "allow 4294967294 copies"),
        ("(?:x{65535}){65535}", "allow 4294836225 copies"),
        ("((a{100}){100}){100}", "allow 1000000 copies"),
        ("(?#[)(x{65535}){65535}", "allow 4294836225 copies"),  # a comment cannot hide the counts
        ("(?x)#[\n(x{65535}){65535}", "allow 4294836225 copies"),
        ("x" * 2001, "2001 characters long; the limit is 2000"),
    ],
)
async def test_patterns_that_would_take_gigabytes_to_compile_are_refused(
    tools: WorkspaceToolset, pattern: str, why: str
) -> None:
    with anyio.fail_after(10):
        failed(await call(tools, "search_text", pattern=pattern), why)


async def test_ordinary_counted_repeats_still_work(ws: Path, tools: WorkspaceToolset) -> None:
    (ws / "dates.txt").write_text("on 2024-05-17 and [x]\n")
    assert (
        ok(await call(tools, "search_text", pattern=r"\d{4}-\d{2}-\d{2}", glob="*.txt"))
        .text()
        .startswith("dates.txt:1:")
    )
    assert "dates.txt:1:" in ok(await call(tools, "search_text", pattern=r"[{]?\[x\]{1,3}", glob="*.txt")).text()


async def _hops(
    monkeypatch: pytest.MonkeyPatch, tools: WorkspaceToolset, name: str, path: str
) -> tuple[int, ToolResult]:
    """(worker-thread hops, result) of one call."""
    hops: list[str] = []
    shipped = anyio.to_thread.run_sync

    async def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(fn, "__qualname__", repr(fn)))
        return await shipped(fn, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    try:
        result = ok(await call(tools, name, path=path))
    finally:
        monkeypatch.setattr(anyio.to_thread, "run_sync", shipped)
    return len(hops), result


async def test_a_small_directory_is_listed_on_the_loop_and_a_larger_one_in_a_thread_alike(
    ws: Path, tools: WorkspaceToolset, monkeypatch: pytest.MonkeyPatch
) -> None:
    for count in (INLINE_LIST_ENTRIES, INLINE_LIST_ENTRIES + 1):
        folder = ws / f"d{count}"
        folder.mkdir()
        for i in reversed(range(count)):
            (folder / f"f{i:03}.txt").write_text("x" * i)
    small_hops, small = await _hops(monkeypatch, tools, "list_dir", f"d{INLINE_LIST_ENTRIES}")
    large_hops, large = await _hops(monkeypatch, tools, "list_dir", f"d{INLINE_LIST_ENTRIES + 1}")
    assert (small_hops, large_hops) == (0, 1)
    for result, count in ((small, INLINE_LIST_ENTRIES), (large, INLINE_LIST_ENTRIES + 1)):
        assert result.structured is not None
        entries = result.structured["entries"]
        assert [e["name"] for e in entries] == [f"f{i:03}.txt" for i in range(count)]  # all, sorted
        assert [e["size"] for e in entries] == list(range(count))


async def test_a_small_file_is_read_on_the_loop_and_a_larger_or_deeper_one_in_a_thread_alike(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = WorkspaceToolset(ws, read_max_bytes=4 * INLINE_READ_BYTES, search_max_matches=MAX_MATCHES)
    line = "0123456789abcde\n"  # 16 bytes
    (ws / "small.txt").write_text(line * (INLINE_READ_BYTES // len(line)))
    (ws / "large.txt").write_text(line * (INLINE_READ_BYTES // len(line)) + "!")
    deep = ws.joinpath(*(f"d{i}" for i in range(INLINE_DEPTH)))
    deep.mkdir(parents=True)
    (deep / "small.txt").write_text(line)
    small_hops, small = await _hops(monkeypatch, tools, "read_file", "small.txt")
    large_hops, large = await _hops(monkeypatch, tools, "read_file", "large.txt")
    deep_hops, deeper = await _hops(monkeypatch, tools, "read_file", str((deep / "small.txt").relative_to(ws)))
    assert (small_hops, large_hops, deep_hops) == (0, 1, 1)
    assert small.text() == (ws / "small.txt").read_text()
    assert large.text() == (ws / "large.txt").read_text()
    assert deeper.text() == line


def _expected_read(data: bytes, offset: int, limit: int | None, max_bytes: int) -> tuple[bytes, int, bool]:
    """What `read_file` must return, by its definition: the lines from `offset`, at most `limit`, cut at
    `max_bytes` (a cut line counts as returned): `(bytes, lines_returned, truncated)`."""
    taken = b"".join(data.splitlines(keepends=True)[offset - 1 :][:limit])
    kept = taken[:max_bytes]
    return kept, kept.count(b"\n") + int(bool(kept) and not kept.endswith(b"\n")), len(taken) > max_bytes


async def test_read_file_returns_the_lines_its_definition_says_for_any_file_offset_limit_and_cap(ws: Path) -> None:
    """Random files (short and long lines, with and without a last newline, on either side of the size read on
    the event loop), offsets, limits and byte caps against the definition."""
    import random

    rng = random.Random(26)
    for case in range(150):
        lines = [b"y" * rng.choice([0, 1, 5, 40, 300, 5000]) for _ in range(rng.randint(1, 12))]
        data = b"\n".join(lines) + rng.choice([b"", b"\n"])
        if not data.strip(b"\n"):
            continue  # an empty or newline-only file has its own answers, tested above
        (ws / "f.txt").write_bytes(data)
        cap = rng.choice([10, 100, 4096, INLINE_READ_BYTES, 2 * INLINE_READ_BYTES])
        offset = rng.randint(1, len(data.splitlines()))
        limit = rng.choice([None, 1, 2, 5, 50])
        tools = WorkspaceToolset(ws, read_max_bytes=cap, search_max_matches=MAX_MATCHES)
        arguments: dict[str, Any] = {"offset": offset} | ({} if limit is None else {"limit": limit})
        result = ok(await call(tools, "read_file", path="f.txt", **arguments))
        kept, count, truncated = _expected_read(data, offset, limit, cap)
        assert result.structured is not None
        got = (result.structured["lines_returned"], result.structured["truncated"])
        assert got == (count, truncated), (case, offset, limit, cap)
        first = result.content[0]
        assert isinstance(first, TextPart) and first.text == kept.decode(), (case, offset, limit, cap)


def test_a_fifo_swapped_in_after_the_size_check_never_blocks_the_loop(
    ws: Path, tools: WorkspaceToolset, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race a process in the workspace could win: `read_file` checked a small regular file, then a FIFO took
    its place before the open. On the event loop the open must not wait for a writer that never comes; the call
    goes to the worker thread, which checks again and reports it."""
    import agent_server.tools.builtin as builtin

    os.mkfifo(ws / "pipe")
    checks: list[str] = []
    real = builtin._regular_file_size  # pyright: ignore[reportPrivateUsage]

    def checked_then_swapped(raw: str, path: Path) -> int:
        checks.append(raw)
        return 10 if len(checks) == 1 else real(raw, path)  # the first check saw a 10-byte file

    monkeypatch.setattr(builtin, "_regular_file_size", checked_then_swapped)
    results: list[ToolResult] = []

    def run() -> None:
        results.append(anyio.run(lambda: call(tools, "read_file", path="pipe")))

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    runner.join(10)
    assert not runner.is_alive(), "read_file blocked opening the FIFO"
    failed(results[0], "is not a regular file")
    assert checks == ["pipe", "pipe"]


def _swap_for_a_symlink(directory: Path, target: Path) -> None:
    directory.rename(directory.with_name(f"{directory.name}-moved"))
    directory.symlink_to(target)


async def test_a_workspace_root_swapped_for_a_symlink_is_not_read_through(
    ws: Path, tools: WorkspaceToolset, tmp_path: Path
) -> None:
    """The root was resolved when the tools were made; a symlink put in its place later leads outside it, and a
    small call on the event loop (which takes a plain path as its real path) must see that too."""
    _swap_for_a_symlink(ws, tmp_path / "outside")
    failed(await call(tools, "read_file", path="secret.txt"), "outside the workspace")
    failed(await call(tools, "list_dir", path="."), "outside the workspace")


async def test_a_symlink_or_dotdot_on_the_way_sends_a_small_call_to_the_worker_thread(
    ws: Path, tools: WorkspaceToolset, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resolving a symlink could wait on wherever it leads (a hung network mount): never on the event loop."""
    (ws / "linked").symlink_to(ws / "src")
    (ws / "src" / "pkg" / "to_readme").symlink_to(ws / "README.md")
    plain = [("read_file", "src/notes.txt"), ("list_dir", "src"), ("read_file", str(ws / "README.md"))]
    linked = [
        ("read_file", "linked/notes.txt"),  # a symlinked directory on the way
        ("read_file", "src/pkg/to_readme"),  # the file itself
        ("list_dir", "src/pkg"),  # a symlink among the entries
        ("read_file", "src/../README.md"),
    ]
    for name, path in plain:
        assert (await _hops(monkeypatch, tools, name, path))[0] == 0, path
    for name, path in linked:
        hops, result = await _hops(monkeypatch, tools, name, path)
        assert hops == 1, path
        assert "hello" in result.text() or "to_readme" in result.text(), result.text()
