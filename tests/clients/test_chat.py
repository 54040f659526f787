"""clients/chat/chat.py driven through a pseudo-terminal, as a person would use it, with a scripted model."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.subprocess.helpers import REPO, server_env, structured

pexpect = pytest.importorskip("pexpect")

CHAT = REPO / "clients" / "chat" / "chat.py"
PROMPT = "› "
SCRIPT = [
    {
        "tool_calls": [{"name": "read_file", "arguments": {"path": "hello.txt"}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 12},
    },
    {
        "expect_contains": "hello world",
        "content": "The file says hello world.",
        "usage": {"prompt_tokens": 140, "completion_tokens": 8},
    },
    {"delay_s": 60, "content": "too late"},
]


def spawn_chat(tmp_path: Path) -> pexpect.spawn:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "hello.txt").write_text("hello world\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": SCRIPT}))
    argv = [str(CHAT), "--workspace", str(workspace), "--state-dir", str(tmp_path / "state")]
    argv += ["--llm", f"script:{script}"]
    env = server_env() | {"NO_COLOR": "1", "TERM": "xterm", "HOME": os.environ.get("HOME", str(tmp_path))}
    return pexpect.spawn(
        sys.executable, argv, env=env, encoding="utf-8", timeout=20, dimensions=(50, 200), cwd=str(tmp_path)
    )


async def recorded_statuses(tmp_path: Path) -> list[str]:
    """The turn statuses stored in the state dir, read back through a fresh server."""
    command = [sys.executable, "-m", "agent_server", "--workspace", str(tmp_path / "ws")]
    command += ["--state-dir", str(tmp_path / "state")]
    params = StdioServerParameters(command=command[0], args=command[1:], env=server_env())
    with anyio.fail_after(20):
        async with Client(params) as client:
            # A new process has no current session (it is per connection): the chat's is the newest.
            newest = (await structured(client, "session_list", {"limit": 1}))["sessions"][0]
            session = await structured(client, "session_get", {"session_id": newest["session_id"]})
    return [turn["status"] for turn in session["turns"]]


@pytest.mark.anyio
async def test_a_turn_live_then_ctrl_c_cancels_the_next_turn_not_the_program(tmp_path: Path) -> None:
    chat = spawn_chat(tmp_path)
    try:
        chat.expect_exact(PROMPT)
        chat.sendline("what does hello.txt say?")
        # The running turn, live: phases, the tool call with its arguments, its result and duration.
        chat.expect_exact("· sampling (round 1)")
        chat.expect_exact('→ read_file {"path": "hello.txt"}')
        chat.expect(r"← read_file ok in (\d+\.\d\d)s · hello world")
        assert float(chat.match.group(1)) < 5
        chat.expect_exact("· sampling (round 2)")
        chat.expect_exact("The file says hello world.")
        chat.expect(r"── completed · 2 model call\(s\) · 1 tool call\(s\) · tokens 240 in / 20 out · [\d.]+s ──")
        chat.expect_exact(PROMPT)

        chat.sendline("and a slow one?")
        chat.expect_exact("· sampling (round 1)")  # the model is now waiting out its 60 s delay
        chat.sendintr()
        chat.expect(r"── cancelled \(Ctrl-C\) after [\d.]+s; the session stays usable ──")
        chat.expect_exact(PROMPT)

        chat.sendline("/sessions")  # the program still takes commands
        chat.expect(r"\* (ses_\w+)  'what does hello.txt say\?'  2 turn\(s\)")
        chat.expect_exact(PROMPT)
        chat.sendline("/quit")
        chat.expect(pexpect.EOF)
    finally:
        chat.close(force=True)
    assert chat.exitstatus == 0, chat.before
    assert await recorded_statuses(tmp_path) == ["completed", "cancelled"]


def test_ctrl_c_at_the_prompt_and_ctrl_d_exit_cleanly(tmp_path: Path) -> None:
    chat = spawn_chat(tmp_path)
    try:
        chat.expect_exact(PROMPT)
        chat.send("half a line")
        chat.sendintr()
        chat.expect(pexpect.EOF)
    finally:
        chat.close(force=True)
    assert chat.exitstatus == 0
    assert "Traceback" not in (chat.before or "")


def test_commands_manage_sessions(tmp_path: Path) -> None:
    chat = spawn_chat(tmp_path)
    try:
        chat.expect_exact("no session yet: your first message starts one")
        chat.expect_exact(PROMPT)
        chat.sendline("/frobnicate")
        chat.expect_exact("unknown command /frobnicate: /help lists the commands")
        chat.sendline("/help")
        for command in ("/new", "/sessions", "/switch ID", "/compact", "/quit"):
            chat.expect_exact(command)
        chat.expect_exact(PROMPT)
        chat.sendline("/new notes")
        chat.expect(r"new session (ses_\w+)  'notes'  0 turn\(s\)")
        notes = chat.match.group(1)
        chat.sendline("/new other")
        chat.expect(r"new session (ses_\w+)  'other'")
        chat.sendline("/compact")
        chat.expect_exact("⟲ nothing to compact yet")
        chat.sendline(f"/switch {notes[:10]}")  # a unique prefix is enough
        chat.expect_exact(f"switched to {notes}  'notes'")
        chat.sendline("/sessions")
        chat.expect_exact(f"* {notes}  'notes'")
        chat.expect_exact(PROMPT)
        chat.sendeof()  # Ctrl-D
        chat.expect(pexpect.EOF)
    finally:
        chat.close(force=True)
    assert chat.exitstatus == 0
    assert "Traceback" not in (chat.before or "")


def test_the_usage_line_shows_unknown_counts_as_a_question_mark() -> None:
    spec = importlib.util.spec_from_file_location("chat_view", CHAT.parent / "view.py")
    assert spec is not None and spec.loader is not None
    view = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(view)
    record = {"status": "completed", "usage": {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None}}
    line, _ = view.usage_line(record, 1.0)
    assert "tokens ? in / ? out" in line
