"""The web view in a real browser (headless Chromium): the session list, a finished turn's timeline, a live turn
updating as it runs and ends, and an approval answered in the page that lets a headless host's `write_file` run.

The servers are real processes: `agent-server view` on a state dir, `agent-server --transport streamable-http`
with the page beside `/mcp`, and a stdio server spawned by an MCP client without elicitation, as `codex exec`
spawns it. With AGENT_SERVER_SCREENSHOTS=DIR each test saves what the page looked like there.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from agent_server import AgentRuntime, Settings
from agent_server.llm.scripted import ScriptedLLM
from tests.subprocess.helpers import ServerDirs, server_env, wait_listening

pytestmark = pytest.mark.anyio

WAIT_MS = 15_000
HOSTILE_PROMPT = "What do my notes say? <img src=x onerror=alert(1)> \u202eevil"
READ_SCRIPT: list[dict[str, Any]] = [
    {
        "content": "Let me look.",
        "tool_calls": [
            {"name": "list_dir", "arguments": {"path": "."}},
            {"name": "read_file", "arguments": {"path": "notes.txt"}},
        ],
        "usage": {"prompt_tokens": 1200, "completion_tokens": 40},
    },
    {"content": "The notes say: <b>ship it</b>.", "usage": {"prompt_tokens": 1400, "completion_tokens": 12}},
]
WRITE_SCRIPT: list[dict[str, Any]] = [
    {"content": "I will write the plan.", "tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "plan.md", "content": "# Plan\n\u202estep 1\n"}}]},
    {"content": "Wrote plan.md."},
]


def screenshot_path(name: str) -> str | None:
    folder = os.environ.get("AGENT_SERVER_SCREENSHOTS")
    return None if not folder else str(Path(folder) / name)


@pytest.fixture
def dirs(tmp_path: Path) -> ServerDirs:
    layout = ServerDirs(tmp_path)
    layout.workspace.mkdir()
    (layout.workspace / "notes.txt").write_text("ship it\n")
    return layout


def write_config(dirs: ServerDirs, **values: Any) -> Path:
    path = dirs.root / "config.json"
    base = {"tools": {"write": True}, "approvals": {"web": True, "timeout_s": 60}}
    path.write_text(json.dumps({**base, **values}))
    return path


async def login_link(stderr: Path, used: int = 0) -> str:
    """The newest login link a server printed on stderr (another process: its file is polled, bounded)."""
    with anyio.fail_after(20):
        while True:
            text = await anyio.Path(stderr).read_text(errors="replace")
            links = re.findall(r"(http://\S+/view/\?token=\S+)", text)
            if len(links) > used:
                return links[-1]
            await anyio.sleep(0.05)


@asynccontextmanager
async def process(argv: list[str], stderr: Path) -> AsyncIterator[None]:
    with stderr.open("wb") as err:
        proc = await anyio.open_process(argv, env=server_env(), stdout=subprocess.DEVNULL, stderr=err)
    try:
        yield
    finally:
        proc.terminate()
        with anyio.fail_after(10):
            await proc.wait()
        await proc.aclose()


def view_argv(dirs: ServerDirs, config: Path | None = None) -> list[str]:
    argv = [sys.executable, "-m", "agent_server", "view", "--state-dir", str(dirs.state), "--port", "0"]
    return [*argv, "--config", str(config)] if config is not None else argv


async def seed(dirs: ServerDirs) -> None:
    """A finished turn with two tool calls, stored as any server stores it."""
    settings = Settings(workspace=dirs.workspace, state_dir=dirs.state)
    async with AgentRuntime(settings, llm=ScriptedLLM(READ_SCRIPT)) as runtime:
        record = await runtime.run_turn(HOSTILE_PROMPT, session_id="new")
    assert record.status == "completed"


async def test_the_session_list_and_a_finished_turns_timeline(browser: Any, dirs: ServerDirs) -> None:
    await seed(dirs)
    stderr = dirs.root / "view.err"
    async with process(view_argv(dirs), stderr):
        link = await login_link(stderr)
        context = await browser.new_context(viewport={"width": 1280, "height": 900})
        page = await context.new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda dialog: dialogs.append(dialog.message))
        await page.goto(link)
        assert "token=" not in page.url  # the one-time token left the address bar
        session = page.locator(".session").first
        await session.wait_for(timeout=WAIT_MS)
        title = await session.locator(".title").inner_text()
        assert title == HOSTILE_PROMPT.replace("\u202e", "\\u202e")  # as text, bidi escaped
        assert "1 turn" in await session.locator(".sub").inner_text()
        assert await page.locator("img").count() == 0  # the prompt's markup stayed text

        await session.click()
        await page.locator(".turn").first.click()
        chart = page.locator(".chart .row")
        await chart.nth(3).wait_for(timeout=WAIT_MS)
        labels = await page.locator(".chart .row .label").all_inner_texts()
        assert labels == ["model · initial", "list_dir", "read_file", "model · followup_1"]
        assert await page.locator("#turn").get_attribute("data-status") == "completed"
        assert "1,200 in" in await page.locator(".chart .row").first.inner_text()
        read = page.locator('details.call-detail:has(code:text-is("read_file"))')
        await read.locator("summary").click()
        assert '"path": "notes.txt"' in await read.locator("pre").first.inner_text()
        assert await read.locator("pre.result").inner_text() == "ship it\n"
        assert "<b>ship it</b>" in await page.locator("pre.answer").inner_text()
        await page.locator("#show-record").click()
        await page.locator("pre.full-record").wait_for(timeout=WAIT_MS)
        assert '"tool_rounds"' in await page.locator("pre.full-record").inner_text()
        for details in await page.locator("details").all():
            await details.evaluate("node => { node.open = true }")
        if (path := screenshot_path("finished-turn.png")) is not None:
            await page.screenshot(path=path, full_page=True)
        assert dialogs == []
        await context.close()


async def test_a_live_turn_beside_mcp_updates_as_it_waits_and_ends(
    browser: Any, dirs: ServerDirs, free_tcp_port: int
) -> None:
    config = write_config(dirs, view={"enabled": True, "progress_interval_s": 0.2})
    stderr = dirs.root / "http.err"
    argv = [*dirs.argv(WRITE_SCRIPT), "--config", str(config), "--transport", "streamable-http"]
    async with process([*argv, "--port", str(free_tcp_port)], stderr):
        with anyio.fail_after(20):
            await wait_listening("127.0.0.1", free_tcp_port)
        link = await login_link(stderr)
        async with Client(f"http://127.0.0.1:{free_tcp_port}/mcp", mode="legacy") as client:  # no elicitation
            started = await client.call_tool("run_turn", {"prompt": "write the plan", "background": True})
            turn_id = started.structured_content["turn_id"]
            context = await browser.new_context(viewport={"width": 1280, "height": 900})
            page = await context.new_page()
            await page.goto(link)
            await page.locator(".session").first.click()
            await page.locator(f'[data-turn="{turn_id}"] a').click()
            asking = page.locator('.chart .row[data-status="asking"]')
            await asking.wait_for(timeout=WAIT_MS)  # write_file waits for its approval, drawn up to now
            assert await asking.locator(".label").inner_text() == "write_file"
            assert await asking.locator(".note").inner_text() == "waiting for approval"
            await page.locator(".approval").wait_for(timeout=WAIT_MS)
            assert await page.locator("#turn").get_attribute("data-status") == "running"
            if (path := screenshot_path("live-turn.png")) is not None:
                await page.screenshot(path=path, full_page=True)
            await answer_elsewhere(dirs, "allow_once")  # another page (another process) answers it
            await page.locator('#turn[data-status="completed"]').wait_for(timeout=WAIT_MS)  # no reload
            assert "Wrote plan.md." in await page.locator("pre.answer").inner_text()
            labels = await page.locator(".chart .row .label").all_inner_texts()
            assert labels == ["model · initial", "list_dir", "model · followup_1", "write_file", "model · followup_2"]
            await page.locator(".approval").wait_for(state="detached", timeout=WAIT_MS)
            await context.close()
    assert (dirs.workspace / "plan.md").exists()


async def answer_elsewhere(dirs: ServerDirs, choice: str) -> None:
    async with AgentRuntime(Settings(workspace=dirs.workspace, state_dir=dirs.state)) as runtime:
        with anyio.fail_after(10):
            pending = await runtime.pending_approvals()
        assert len(pending) == 1
        assert await runtime.answer_approval(pending[0].question_id, choice)


async def test_an_approval_answered_in_the_page_lets_a_headless_hosts_write_run(browser: Any, dirs: ServerDirs) -> None:
    """The host spawns a stdio server and cannot be asked (as `codex exec`); the user runs `agent-server view`."""
    config = write_config(dirs)
    stderr = dirs.root / "view.err"
    command, *args = [*dirs.argv(WRITE_SCRIPT), "--config", str(config)]
    params = StdioServerParameters(command=command, args=args, env=server_env(), cwd=str(dirs.root))
    async with process(view_argv(dirs), stderr), anyio.create_task_group() as tg:
        link = await login_link(stderr)
        results: list[Any] = []

        async def host() -> None:
            with anyio.fail_after(30):
                async with Client(stdio_client(params), mode="legacy") as client:
                    results.append(await client.call_tool("run_turn", {"prompt": "write the plan", "detail": "full"}))

        tg.start_soon(host)
        context = await browser.new_context(viewport={"width": 1280, "height": 900})
        page = await context.new_page()
        await page.goto(link)
        card = page.locator(".approval")
        await card.wait_for(timeout=WAIT_MS)
        assert "write_file" in await card.locator("h2").inner_text()
        shown = await card.locator("pre.call").inner_text()
        assert "plan.md" in shown and "\\u202estep 1" in shown  # the whole call, the bidi override escaped
        assert [await b.inner_text() for b in await card.locator("button").all()] == [
            "Allow once",
            "Allow for this session",
            "Deny",
        ]
        assert not (dirs.workspace / "plan.md").exists()
        if (path := screenshot_path("pending-approval.png")) is not None:
            await page.screenshot(path=path, full_page=True)
        await card.locator('button[data-choice="allow_once"]').click()
        await card.locator(".done").wait_for(timeout=WAIT_MS)
        await context.close()  # the task group waits for the host's call to end
    record = results[0].structured_content
    assert record["status"] == "completed", record
    assert (dirs.workspace / "plan.md").read_text() == "# Plan\n\u202estep 1\n"
    assert [(a["tool"], a["channel"], a["decision"]) for a in record["approvals"]] == [
        ("write_file", "web", "allow_once")
    ]
