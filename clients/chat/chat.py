#!/usr/bin/env python3
"""A terminal chat with agent-server: one session, every turn shown live.

    python clients/chat/chat.py                                        # workspace: cwd; model: the server's default
    python clients/chat/chat.py --workspace ~/project --llm openai:gpt-4.1-mini
    python clients/chat/chat.py --llm script:clients/demo/list_workspace.json -- --config ~/agent.toml

The server is spawned as `python -m agent_server` with the same interpreter (everything after `--`
is appended to its command line) and spoken to only through MCP: the SDK's `Client` over stdio,
opted in to the full event stream (`dev.agent-server/events`). A running turn shows its phases,
each tool call with its arguments and duration, the answer as it streams, and a closing usage line.

Ctrl-C during a turn cancels that turn (the server records it as `cancelled`; the session stays
usable). Ctrl-C at the prompt, Ctrl-D or /quit exits. /help lists the commands. The server's log
(its stderr) goes to a file, by default STATE_DIR/chat-server.log, so it never scribbles over the
chat. Plain ANSI colours, off when stdout is not a terminal or NO_COLOR is set.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

import anyio
import anyio.from_thread
import anyio.lowlevel
from mcp import Client, MCPError, StdioServerParameters
from mcp.client import ClientExtension, NotificationBinding
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict
from view import Screen, Style, TurnView, describe_compaction, seconds, shorten, usage_line  # also sets up readline

EVENTS_EXTENSION = "dev.agent-server/events"
EVENT_METHOD = "notifications/agent_server/event"
CONNECTION_CLOSED = -32000

HELP = """\
commands:
  /new [TITLE]         start a new session (it becomes the current one)
  /sessions            list the sessions (* marks the current one)
  /switch ID           continue another session (a unique prefix of its id is enough)
  /compact [TEXT]      summarise the current session's older history (TEXT: what the summary must keep)
  /tools               the tools the agent can call, and mounted MCP servers
  /help                this list
  /quit                exit (also Ctrl-D, or Ctrl-C at the prompt)
anything else is sent to the agent as a prompt; Ctrl-C while it runs cancels the turn"""


class EventParams(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str


class LiveEvents(ClientExtension):
    """Opts in to the server's full event stream and hands every event to the view."""

    identifier = EVENTS_EXTENSION

    def __init__(self, view: TurnView) -> None:
        self.view = view

    def notifications(self) -> list[NotificationBinding[Any]]:
        async def on_event(params: EventParams) -> None:
            self.view.on_event(params.model_dump())

        return [NotificationBinding(method=EVENT_METHOD, params_type=EventParams, handler=on_event)]


# --- input -------------------------------------------------------------------------------


async def read_line(prompt: str) -> str | None:
    """input() in a daemon thread; None at end of input.

    A daemon thread rather than `anyio.to_thread.run_sync(..., abandon_on_cancel=True)`: that
    abandons the call but not the thread, and anyio's worker threads are not daemons, so a
    program quitting while input() waits would hang at exit until the user pressed Enter.
    """
    done = anyio.Event()
    outcome: list[Any] = []
    token = anyio.lowlevel.current_token()

    def work() -> None:
        try:
            outcome.append(input(prompt))
        except EOFError:
            outcome.append(None)
        except BaseException as exc:  # handed to the event loop
            outcome.append(exc)
        with contextlib.suppress(Exception):  # the loop may be gone: the program quit meanwhile
            anyio.from_thread.run_sync(done.set, token=token)

    threading.Thread(target=work, name="chat-input", daemon=True).start()
    await done.wait()
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


@contextlib.contextmanager
def terminal_restored() -> Iterator[None]:
    """Put the terminal back as it was: readline may be mid-line when the program quits."""
    try:
        import termios
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    try:
        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd)
    except (termios.error, OSError, ValueError):  # not a terminal
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)


# --- the chat ----------------------------------------------------------------------------


class Quit(Exception):
    """The user asked to leave."""


class Chat:
    def __init__(self, client: Client, screen: Screen, view: TurnView) -> None:
        self.client = client
        self.screen = screen
        self.view = view
        self.session_id: str | None = None
        self._call_scope: anyio.CancelScope | None = None

    # Every server call runs in a scope that Ctrl-C cancels; Ctrl-C with no call running quits.
    async def watch_interrupts(self, quit_scope: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                if self._call_scope is not None:
                    self._call_scope.cancel()
                else:
                    self.screen.line()
                    quit_scope.cancel()

    async def _cancellable(self, call: Callable[[], Awaitable[CallToolResult]]) -> CallToolResult | None:
        """The call's result, or None when Ctrl-C cancelled it (the SDK then tells the server)."""
        with anyio.CancelScope() as scope:
            self._call_scope = scope
            try:
                return await call()
            finally:
                self._call_scope = None
        return None

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        """A short tool call; its structuredContent, or None after printing why there is none."""
        result = await self._cancellable(lambda: self.client.call_tool(tool, arguments))
        if result is None:
            self.screen.line("cancelled", "red")
            return None
        if result.is_error:
            self.screen.line(f"! {error_text(result)}", "red")
            return None
        return result.structured_content or {}

    async def start(self, session: str | None) -> None:
        info = self.client.server_info
        version = f" {info.version}" if info and info.version else ""
        self.screen.line(f"agent-server{version} chat", "bold")
        if session:
            await self.switch(session)
        else:
            listing = await self.call("session_list", {"limit": 200}) or {}
            active = [s for s in listing.get("sessions", []) if s.get("active")]
            if active:
                self.session_id = active[0]["session_id"]
                self.screen.line(f"session {describe_session(active[0])}", "dim")
            else:
                self.screen.line("no session yet: your first message starts one", "dim")
        self.screen.line("Ctrl-C cancels a running turn · Ctrl-D or /quit exits · /help lists commands", "dim")

    async def loop(self) -> None:
        while True:
            line = await read_line(self.screen.style.prompt("› "))
            self.screen.midline = False
            if line is None:
                self.screen.line()
                return
            line = line.strip()
            if not line:
                continue
            try:
                if line.startswith("/"):
                    await self.command(line)
                else:
                    await self.turn(line)
            except Quit:
                return

    async def command(self, line: str) -> None:
        name, _, rest = line.partition(" ")
        rest = rest.strip()
        handlers: dict[str, Callable[[str], Awaitable[None]]] = {
            "/new": self.new,
            "/sessions": self.sessions,
            "/switch": self.switch,
            "/compact": self.compact,
            "/tools": self.tools,
            "/help": self.help,
            "/quit": self.quit,
            "/exit": self.quit,
        }
        handler = handlers.get(name)
        if handler is None:
            self.screen.line(f"unknown command {name}: /help lists the commands", "yellow")
            return
        await handler(rest)

    async def turn(self, prompt: str) -> None:
        arguments: dict[str, Any] = {"prompt": prompt}
        if self.session_id:
            arguments["session_id"] = self.session_id
        started = time.monotonic()
        self.view.start()
        try:
            result = await self._cancellable(lambda: self.client.call_tool("run_turn", arguments))
            if result is not None and self.view.turn_id:
                # Events are delivered by their own task: let the last ones catch up with the answer.
                with anyio.move_on_after(1):
                    await self.view.done.wait()
        finally:
            self.view.stop()
        took = time.monotonic() - started
        if result is None:
            self.session_id = self.session_id or self.view.session_id
            self.screen.line(f"── cancelled (Ctrl-C) after {seconds(took)}; the session stays usable ──", "red")
            return
        record = result.structured_content or {}
        if "status" not in record:  # refused before a turn started (bad arguments, unknown session)
            self.screen.line(f"! {error_text(result)}", "red")
            return
        self.session_id = record.get("session_id") or self.session_id
        final = str(record.get("final_text") or "")
        if final.startswith(self.view.streamed):  # whatever the stream did not show (or all of it)
            self.screen.write(final[len(self.view.streamed) :])
        error = record.get("error")
        if error and not self.view.errors:
            self.screen.line(f"! {error.get('type')}: {error.get('message')}", "red")
        self.screen.line(*usage_line(record, took))

    async def new(self, title: str) -> None:
        session = await self.call("session_create", {"title": title} if title else {})
        if session is not None:
            self.session_id = session["session_id"]
            self.screen.line(f"new session {describe_session(session)}", "green")

    async def sessions(self, _: str) -> None:
        listing = await self.call("session_list", {"limit": 200})
        if listing is None:
            return
        sessions = listing.get("sessions", [])
        if not sessions:
            self.screen.line("no sessions yet", "dim")
        for session in sessions:
            mark = "*" if session["session_id"] == self.session_id else " "
            self.screen.line(f"{mark} {describe_session(session)}")

    async def switch(self, wanted: str) -> None:
        if not wanted:
            self.screen.line("usage: /switch ID (see /sessions)", "yellow")
            return
        listing = await self.call("session_list", {"limit": 200}) or {}
        matches = [s["session_id"] for s in listing.get("sessions", []) if s["session_id"].startswith(wanted)]
        session = await self.call("session_switch", {"session_id": matches[0] if len(matches) == 1 else wanted})
        if session is not None:
            self.session_id = session["session_id"]
            self.screen.line(f"switched to {describe_session(session)}", "green")

    async def compact(self, instructions: str) -> None:
        if not self.session_id:
            self.screen.line("nothing to compact: no session yet", "yellow")
            return
        arguments: dict[str, Any] = {"session_id": self.session_id}
        if instructions:
            arguments["instructions"] = instructions
        self.view.start()
        try:
            record = await self.call("compact", arguments)
        finally:
            self.view.stop()
        if record is not None:
            self.screen.line(describe_compaction(record), "yellow")

    async def tools(self, _: str) -> None:
        listing = await self.call("agent_tools", {})
        if listing is None:
            return
        for tool in listing.get("tools", []):
            head = f"  {tool['name']} [{tool.get('source', '?')}] "
            self.screen.line(head + shorten(tool.get("description", ""), self.screen.width - len(head)))
        for server in listing.get("servers", []):
            error = f": {server['error']}" if server.get("error") else ""
            self.screen.line(f"  server {server['name']} ({server['transport']}) {server['state']}{error}", "dim")

    async def help(self, _: str) -> None:
        self.screen.line(HELP)

    async def quit(self, _: str) -> None:
        raise Quit


def describe_session(session: dict[str, Any]) -> str:
    updated = str(session.get("updated_at", ""))[:16].replace("T", " ")
    title = shorten(str(session.get("title", "")), 50)
    return f"{session['session_id']}  {title!r}  {session.get('turn_count', 0)} turn(s)  {updated}"


def error_text(result: CallToolResult) -> str:
    error = (result.structured_content or {}).get("error")
    if isinstance(error, dict) and error.get("message"):
        return f"{error.get('type', 'error')}: {error['message']}"
    return " ".join(part.text for part in result.content if isinstance(part, TextContent)) or "the call failed"


# --- start-up ----------------------------------------------------------------------------


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1 :]
    parser = argparse.ArgumentParser(
        description="Chat with agent-server in a terminal. Arguments after `--` go to the server.",
    )
    parser.add_argument("--workspace", type=Path, default=Path.cwd(), help="workspace root (default: cwd)")
    parser.add_argument("--llm", help="model provider (default: the server's, from its config and environment)")
    parser.add_argument("--state-dir", type=Path, help="where sessions are stored (default: WORKSPACE/.agent_server)")
    parser.add_argument("--session", help="session id to continue (default: the active session)")
    parser.add_argument("--mode", choices=["auto", "legacy"], default="auto", help="MCP protocol era (default: auto)")
    parser.add_argument("--server-log", type=Path, help="the server's stderr (default: STATE_DIR/chat-server.log)")
    parser.add_argument("--no-color", action="store_true", help="no ANSI colours (also: NO_COLOR=1)")
    return parser.parse_args(argv), extra


def server_command(args: argparse.Namespace, extra: list[str]) -> list[str]:
    command = [sys.executable, "-m", "agent_server", "--workspace", str(args.workspace.resolve())]
    if args.state_dir:
        command += ["--state-dir", str(args.state_dir.resolve())]
    if args.llm:
        command += ["--llm", args.llm]
    return command + extra


async def run(args: argparse.Namespace, extra: list[str], log: TextIO, screen: Screen) -> None:
    command, *server_args = server_command(args, extra)
    # The SDK merges `env` over a minimal environment; pass ours on (a real provider needs its API key).
    params = StdioServerParameters(command=command, args=server_args, env=dict(os.environ))
    view = TurnView(screen)
    async with Client(stdio_client(params, errlog=log), mode=args.mode, extensions=[LiveEvents(view)]) as client:
        chat = Chat(client, screen, view)
        async with anyio.create_task_group() as group:
            group.start_soon(chat.watch_interrupts, group.cancel_scope)
            await chat.start(args.session)
            await chat.loop()
            group.cancel_scope.cancel()


def main(argv: list[str] | None = None) -> int:
    args, extra = parse_args(sys.argv[1:] if argv is None else argv)
    color = not args.no_color and not os.environ.get("NO_COLOR") and sys.stdout.isatty()
    screen = Screen(sys.stdout, Style(color and os.environ.get("TERM") != "dumb"))
    log_path = args.server_log or (args.state_dir or args.workspace / ".agent_server") / "chat-server.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    logged_before = log_path.stat().st_size if log_path.exists() else 0
    code = 0
    with terminal_restored(), log_path.open("a", encoding="utf-8") as log:
        try:
            code = start(args, extra, log, screen)
        except* MCPError as group:
            for exc in leaves(group):
                screen.line(f"MCP error {exc.code}: {exc.message}", "red")
            code = 2
        except* OSError as group:
            for exc in leaves(group):
                screen.line(f"cannot start agent-server: {exc}", "red")
            code = 2
    if code == 2:  # show what the server said on its way out
        with log_path.open(encoding="utf-8", errors="replace") as log:
            log.seek(logged_before)
            for line in log.read().splitlines()[-8:]:
                screen.line(f"  {line}", "dim")
        screen.line(f"the server's log: {log_path}", "dim")
    return code


def start(args: argparse.Namespace, extra: list[str], log: TextIO, screen: Screen) -> int:
    try:
        anyio.run(run, args, extra, log, screen)
    except KeyboardInterrupt:  # Ctrl-C before the chat was up
        return 130
    return 0


def leaves(group: BaseExceptionGroup[Any]) -> list[Any]:
    """The exceptions inside a (nested) exception group."""
    found: list[Any] = []
    for exc in group.exceptions:
        found += leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return found


if __name__ == "__main__":
    sys.exit(main())
