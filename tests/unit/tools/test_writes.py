"""write_file and edit_file: confinement, atomic writes, protected places, edit errors and the diff."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_server.settings import ToolsOptions
from agent_server.tools.builtin import SPECS as READ_TOOLS
from agent_server.tools.builtin import WorkspaceToolset
from agent_server.tools.writes import DIFF_MAX_LINES, short_diff
from agent_server.types import ToolCall, ToolResult
from tests.unit.mounts.helpers import poll_until

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
    assert {spec.name for spec in await plain.list_tools()} == set(READ_TOOLS)
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


# --- protected paths, bounds, races, temporary files -------------------------------------------------


def protected_tools(ws: Path, **options: Any) -> WorkspaceToolset:
    return WorkspaceToolset(
        ws, read_max_bytes=1000, search_max_matches=5, options=ToolsOptions(write=True, **options), state_dir=None
    )


@pytest.mark.parametrize(
    "path",
    [".mcp.json", ".Vscode/mcp.json", "a/b/.cursor/mcp.json", ".claude/settings.json", ".codex/config.toml",
     ".gemini/settings.json", ".zed/settings.json", ".agents/x.md", ".GIT/hooks/pre-commit", "./.mcp.json"],
)  # fmt: skip
async def test_the_config_places_of_hosts_and_agents_are_protected_in_any_case(ws: Path, path: str) -> None:
    failed(await call(protected_tools(ws), "write_file", path=path, content="{}"), "is a protected path")
    assert not (ws / path).exists()


async def test_a_path_through_a_symlink_into_a_protected_place_is_refused(ws: Path) -> None:
    (ws / ".vscode").mkdir()
    (ws / "settings").symlink_to(ws / ".vscode", target_is_directory=True)
    (ws / ".vscode" / "settings.json").write_text("{}")
    (ws / "alias.json").symlink_to(ws / ".vscode" / "settings.json")
    for path in ["settings/settings.json", "alias.json"]:
        for tool, extra in [("write_file", {"content": "x"}), ("edit_file", {"old_text": "{}", "new_text": "x"})]:
            failed(await call(protected_tools(ws), tool, path=path, **extra), "is a protected path")
    assert (ws / ".vscode" / "settings.json").read_text() == "{}"


async def test_protected_paths_are_a_setting_with_relative_and_absolute_entries(ws: Path, tmp_path: Path) -> None:
    tools = protected_tools(ws, protected_paths=("config/agent.toml", str(ws / "Secrets")))
    failed(await call(tools, "write_file", path="CONFIG/agent.toml", content="x"), "config/agent.toml")
    failed(await call(tools, "write_file", path="secrets/deep/key", content="x"), "is a protected path")
    written = await call(tools, "write_file", path=".vscode/settings.json", content="{}")  # the list replaced
    assert not written.is_error, written.text()


async def test_an_opted_in_protected_path_needs_the_users_own_approval_of_the_call(ws: Path) -> None:
    from agent_server.approvals import approved_by_user

    tools = protected_tools(ws, protected_ask=(".vscode/settings.json",))
    screened = await tools.screen(ToolCall(id="c", name="write_file", arguments={"path": ".vscode/settings.json"}))
    assert screened is not None and screened.warning is not None and screened.refusal is None
    failed(await call(tools, "write_file", path=".vscode/settings.json", content="{}"), "needs the user's own")
    with approved_by_user(True):
        assert not (await call(tools, "write_file", path=".vscode/settings.json", content="{}")).is_error
    failed(await call(tools, "write_file", path=".vscode/launch.json", content="{}"), "is a protected path")


async def test_a_write_over_write_max_bytes_is_refused_before_it_is_asked(ws: Path) -> None:
    tools = protected_tools(ws, write_max_bytes=100)
    screened = await tools.screen(ToolCall(id="c", name="write_file", arguments={"path": "a", "content": "é" * 60}))
    assert screened is not None and "tools.write_max_bytes" in (screened.refusal or "")
    failed(await call(tools, "write_file", path="a.txt", content="x" * 101), "over the write limit of 100 bytes")
    failed(await call(tools, "write_file", path="a.txt", content="é" * 60), "(120 bytes)")
    assert not (ws / "a.txt").exists()
    (ws / "small.txt").write_text("ab")
    grown = await call(tools, "edit_file", path="small.txt", old_text="a", new_text="a" * 200)
    failed(grown, "the edited file is over the write limit")
    assert (ws / "small.txt").read_text() == "ab"


async def test_a_fifo_in_place_of_a_file_is_refused_without_waiting(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    failed(await call(protected_tools(ws), "edit_file", path="pipe", old_text="a", new_text="b"), "not a regular")
    failed(await call(protected_tools(ws), "write_file", path="pipe", content="b"), "not a regular file")


SWAPPER = """
import ctypes, os, sys
target, link, outside, stop = sys.argv[1:]
os.symlink(outside, link)
exchange = ctypes.CDLL(None, use_errno=True).renameat2  # RENAME_EXCHANGE: `d` is always there, dir or link
print("swapping", flush=True)
while not os.path.exists(stop):
    if exchange(-100, target.encode(), -100, link.encode(), 2) != 0:
        sys.exit(f"renameat2: errno {ctypes.get_errno()}")
"""
"""Swaps the directory `target` and a symlink to `outside`, atomically and as fast as it can."""


async def test_a_directory_swapped_for_a_symlink_while_writing_never_leads_a_write_out(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A racing process keeps swapping `d` for a symlink to a directory outside; 400 writes and edits into
    `d` may fail ("changed while it was written"), but none of them, nor a temporary file, lands outside."""
    monkeypatch.setattr("agent_server.tools.writes.os.fsync", lambda fd: None)  # 400 disk flushes: only slow
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "e.txt").write_text("keep\n")
    target, stop = ws / "d", tmp_path / "stop"
    target.mkdir()
    (target / "e.txt").write_text("keep\n")
    tools = protected_tools(ws)
    argv = [sys.executable, "-c", SWAPPER, str(target), str(ws / "d.link"), str(outside), str(stop)]
    swapper = await anyio.open_process(argv, stderr=None)
    try:
        assert swapper.stdout is not None
        with anyio.fail_after(60):
            assert (await swapper.stdout.receive()).startswith(b"swapping")
            for index in range(200):
                await call(tools, "write_file", path=f"d/f{index}.txt", content="pwned")
                await call(tools, "edit_file", path="d/e.txt", old_text="keep\n", new_text="pwned\n")
    finally:
        stop.touch()
        with anyio.fail_after(10):
            assert await swapper.wait() == 0
    assert sorted(p.name for p in outside.iterdir()) == ["e.txt"]
    assert (outside / "e.txt").read_text() == "keep\n"


async def test_a_temporary_file_of_a_killed_write_is_named_so_and_removed_once_stale(ws: Path, tmp_path: Path) -> None:
    """A writer killed (SIGKILL) in the middle leaves its temporary file; the next write in that directory
    removes it once it is old and its process gone, and leaves a live writer's and a fresh one alone."""
    script = (
        "import os, sys, time\n"
        "from pathlib import Path\n"
        "from agent_server.settings import ToolsOptions\n"
        "from agent_server.tools.builtin import WorkspaceToolset\n"
        "from agent_server.tools.writes import WriteFileArguments\n"
        "os.fsync = lambda fd: time.sleep(60)\n"
        f"tools = WorkspaceToolset(Path({str(ws)!r}), read_max_bytes=1, search_max_matches=1, "
        "options=ToolsOptions(write=True))\n"
        "tools._writer.write_file(WriteFileArguments(path='src/big.txt', content='x' * 1000000))\n"
    )
    writer = await anyio.open_process([sys.executable, "-c", script], stdout=None, stderr=None)
    try:
        await poll_until(lambda: any((ws / "src").glob(".big.txt.*.agent-server.tmp")), timeout=20)
    finally:
        writer.kill()  # SIGKILL: no clean-up runs
        with anyio.fail_after(10):
            await writer.wait()
    (left,) = (ws / "src").glob(".big.txt.*.agent-server.tmp")
    assert left.name.startswith(f".big.txt.{writer.pid}-")
    hour_ago = time.time() - 3600
    os.utime(left, (hour_ago, hour_ago))
    live = ws / "src" / f".other.txt.{os.getppid()}-0123abcd.agent-server.tmp"  # the test runner's parent runs
    fresh = ws / "src" / f".new.txt.{writer.pid}-0123abcd.agent-server.tmp"
    for path in (live, fresh):
        path.write_text("partial")
    os.utime(live, (hour_ago, hour_ago))
    assert not (await call(protected_tools(ws), "write_file", path="src/other.txt", content="ok")).is_error
    assert not left.exists() and live.exists() and fresh.exists()
