"""write_file and edit_file: confinement, atomic writes, protected places, edit errors and the diff."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_server.settings import ToolsOptions
from agent_server.tools.builtin import WorkspaceToolset
from agent_server.tools.writes import DIFF_MAX_LINES, short_diff
from agent_server.types import ToolCall, ToolResult

pytestmark = pytest.mark.anyio


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "mod.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 1\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("keep me\n")
    return root


@pytest.fixture
def tools(ws: Path, tmp_path: Path) -> WorkspaceToolset:
    options = ToolsOptions(write=True, edit_max_bytes=10_000)
    return WorkspaceToolset(
        ws, read_max_bytes=1000, search_max_matches=5, options=options, state_dir=tmp_path / "state"
    )


async def call(tools: WorkspaceToolset, name: str, **arguments: Any) -> ToolResult:
    return await tools.call_tool(ToolCall(id="call_1", name=name, arguments=arguments))


def failed(result: ToolResult, *fragments: str) -> str:
    assert result.is_error, result.text()
    for fragment in fragments:
        assert fragment in result.text()
    return result.text()


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root (symlinks not followed) with its bytes."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def temporaries(root: Path) -> list[Path]:
    return list(root.rglob("*.tmp"))


async def test_write_file_creates_parents_and_replaces_atomically_keeping_the_mode(
    tools: WorkspaceToolset, ws: Path
) -> None:
    created = await call(tools, "write_file", path="new/deep/file.txt", content="héllo\n")
    assert not created.is_error and created.structured == {"path": "new/deep/file.txt", "bytes": 7, "created": True}
    assert (ws / "new" / "deep" / "file.txt").read_text() == "héllo\n"
    script = ws / "run.sh"
    script.write_text("old")
    script.chmod(0o750)
    replaced = await call(tools, "write_file", path=str(script), content="new")
    assert replaced.text() == "Replaced run.sh (3 bytes)"
    assert script.read_text() == "new" and (script.stat().st_mode & 0o777) == 0o750
    assert not temporaries(ws), "no temporary file is left behind"


async def test_a_failed_write_loses_nothing(tools: WorkspaceToolset, ws: Path) -> None:
    target = ws / "src" / "mod.py"
    before = target.read_bytes()
    result = await call(tools, "write_file", path="src/mod.py", content="bad \ud800 text")
    failed(result, "not valid Unicode")
    assert target.read_bytes() == before
    failed(await call(tools, "write_file", path="src/mod.py/inner.txt", content="x"), "write_file failed")
    assert target.read_bytes() == before
    assert not temporaries(ws)


@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
async def test_paths_leading_out_of_the_workspace_are_refused_and_nothing_outside_changes(
    tools: WorkspaceToolset, ws: Path, tmp_path: Path, tool: str
) -> None:
    outside = tmp_path / "outside"
    (ws / "link_out").symlink_to(outside, target_is_directory=True)
    (ws / "file_link").symlink_to(outside / "secret.txt")
    (ws / "dangling").symlink_to(outside / "new.txt")
    before = snapshot(tmp_path / "outside")
    arguments = {"content": "pwned"} if tool == "write_file" else {"old_text": "keep", "new_text": "pwned"}
    for path in ["../outside/secret.txt", str(outside / "secret.txt"), "link_out/secret.txt", "link_out/new.txt"]:
        failed(await call(tools, tool, path=path, **arguments), "outside the workspace")
    for through in ["file_link", "dangling"]:  # writing THROUGH a symlink whose target is outside
        failed(await call(tools, tool, path=through, **arguments), "outside the workspace")
    assert snapshot(tmp_path / "outside") == before
    assert (ws / "file_link").is_symlink() and (ws / "dangling").is_symlink()


async def test_writing_through_a_symlink_inside_the_workspace_changes_its_target(
    tools: WorkspaceToolset, ws: Path
) -> None:
    (ws / "alias.py").symlink_to(ws / "src" / "mod.py")
    result = await call(tools, "edit_file", path="alias.py", old_text="def g", new_text="def h")
    assert not result.is_error, result.text()
    assert "def h" in (ws / "src" / "mod.py").read_text()
    assert (ws / "alias.py").is_symlink()


@pytest.mark.parametrize("path", [".git/hooks/pre-commit", "sub/.GIT/config", ".agent_server/prompts/x.md"])
async def test_git_and_agent_state_directories_are_refused(tools: WorkspaceToolset, ws: Path, path: str) -> None:
    failed(await call(tools, "write_file", path=path, content="#!/bin/sh\n"), "do not change")
    assert not (ws / path).exists()


async def test_the_state_directory_outside_the_workspace_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "ws" / "state"
    tools = WorkspaceToolset(
        tmp_path / "ws", read_max_bytes=10, search_max_matches=1, options=ToolsOptions(write=True), state_dir=state
    )
    failed(await call(tools, "write_file", path="state/state.db", content="x"), "protected path")
    failed(await call(tools, "write_file", path="STATE/state.db", content="x"), "protected path")


async def test_edit_file_replaces_once_and_shows_a_diff(tools: WorkspaceToolset, ws: Path) -> None:
    result = await call(
        tools, "edit_file", path="src/mod.py", old_text="def f():\n    return 1", new_text="def f():\n    return 2"
    )
    assert not result.is_error, result.text()
    assert (ws / "src" / "mod.py").read_text().startswith("def f():\n    return 2\n")
    assert result.structured == {"path": "src/mod.py", "replacements": 1}
    assert result.text().splitlines()[:6] == [
        "Edited src/mod.py: replaced 1 occurrence",
        "--- a/src/mod.py",
        "+++ b/src/mod.py",
        "@@ -1,5 +1,5 @@",
        " def f():",
        "-    return 1",
    ]


async def test_edit_file_errors_are_clear_and_change_nothing(tools: WorkspaceToolset, ws: Path) -> None:
    before = snapshot(ws)
    failed(await call(tools, "edit_file", path="nope.py", old_text="a", new_text="b"), "file not found", "nope.py")
    failed(await call(tools, "edit_file", path="src/mod.py", old_text="return 1", new_text="x"), "occurs 2 times")
    failed(await call(tools, "edit_file", path="src/mod.py", old_text="", new_text="x"), "old_text is empty")
    failed(await call(tools, "edit_file", path="src/mod.py", old_text="return 9", new_text="x"), "not found")
    failed(await call(tools, "edit_file", path="src", old_text="a", new_text="b"), "is a directory")
    assert snapshot(ws) == before


async def test_edit_file_replace_all_counts_the_replacements(tools: WorkspaceToolset, ws: Path) -> None:
    result = await call(
        tools, "edit_file", path="src/mod.py", old_text="return 1", new_text="return 0", replace_all=True
    )
    assert result.structured == {"path": "src/mod.py", "replacements": 2}
    assert (ws / "src" / "mod.py").read_text().count("return 0") == 2


async def test_edit_file_hints_at_crlf_and_refuses_binary_and_large_files(tools: WorkspaceToolset, ws: Path) -> None:
    (ws / "dos.txt").write_bytes(b"one\r\ntwo\r\n")
    failed(await call(tools, "edit_file", path="dos.txt", old_text="one\ntwo", new_text="x"), "CRLF")
    (ws / "blob.bin").write_bytes(b"a\x00b")
    failed(await call(tools, "edit_file", path="blob.bin", old_text="a", new_text="b"), "binary")
    (ws / "big.txt").write_text("x" * 10_001)
    failed(await call(tools, "edit_file", path="big.txt", old_text="x", new_text="y"), "over the edit limit")


def test_short_diff_numbers_hunks_as_in_the_whole_file_and_is_capped() -> None:
    before = "".join(f"line {i}\n" for i in range(1, 1001))
    after = before.replace("line 500\n", "line five hundred\n")
    diff = short_diff("f.txt", before, after).splitlines()
    assert diff[2] == "@@ -497,7 +497,7 @@"
    assert "-line 500" in diff and "+line five hundred" in diff
    everything = short_diff("f.txt", before, after.replace("line", "LINE"))
    lines = everything.splitlines()
    assert len(lines) == DIFF_MAX_LINES + 1 and lines[-1].startswith("[diff cut: ")


async def test_write_tools_are_off_by_default(ws: Path) -> None:
    plain = WorkspaceToolset(ws, read_max_bytes=10, search_max_matches=1)
    assert {spec.name for spec in await plain.list_tools()} == {"read_file", "list_dir", "search_text"}
    result = await call(plain, "write_file", path="x.txt", content="x")
    failed(result, "unknown tool")
    assert not (ws / "x.txt").exists()


async def test_a_write_that_fails_on_the_disk_leaves_the_old_file_whole(
    tools: WorkspaceToolset, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("agent_server.tools.writes.os.fsync", disk_full)
    target = ws / "src" / "mod.py"
    before = target.read_bytes()
    failed(await call(tools, "write_file", path="src/mod.py", content="new text"), "No space left on device")
    failed(await call(tools, "edit_file", path="src/mod.py", old_text="def g", new_text="def h"), "No space left")
    assert target.read_bytes() == before
    assert not temporaries(ws)
