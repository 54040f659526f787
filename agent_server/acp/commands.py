"""The slash commands an ACP session offers (`available_commands_update`), run without the model.

A prompt whose text starts with `/compact`, `/fork`, `/sessions` or `/tools` runs that command and
answers with one agent message; any other prompt (including another `/word`) goes to the model. The
exchange is stored as a turn of the session (`AgentRuntime.record_command`: listed, replayed by
`session/load`, never read by the model).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from acp.schema import AvailableCommand, AvailableCommandInput, UnstructuredCommandInput

from agent_server.runtime import AgentRuntime

SESSIONS_SHOWN = 20


@dataclass(frozen=True)
class CommandContext:
    runtime: AgentRuntime
    """The runtime in the session's workspace (`AgentRuntime.in_workspace`)."""
    session_id: str


Handler = Callable[[CommandContext, str], Awaitable[str]]


async def _compact(ctx: CommandContext, instructions: str) -> str:
    record = await ctx.runtime.compact(ctx.session_id, instructions=instructions or None)
    if record.error:
        return f"Compaction did not run: {record.error}"
    return (
        f"Compacted {record.compacted_message_count} messages ({record.mode} summary); "
        f"{record.preserved_message_count} kept; about {record.estimated_tokens_before} -> "
        f"{record.estimated_tokens_after} tokens."
    )


async def _fork(ctx: CommandContext, _args: str) -> str:
    fork = await ctx.runtime.fork_session(ctx.session_id)
    return f"Forked this session into {fork.session_id} ({fork.title!r}): load it to continue there."


async def _sessions(ctx: CommandContext, _args: str) -> str:
    sessions, more = await ctx.runtime.list_sessions(limit=SESSIONS_SHOWN, connection=None)
    lines = [
        f"- {s.session_id}{' (this one)' if s.session_id == ctx.session_id else ''}: {s.title} "
        f"({s.turn_count} turns, updated {s.updated_at})"
        for s in sessions
    ]
    if more:
        lines.append(f"(the newest {SESSIONS_SHOWN} shown)")
    return "\n".join(lines) or "No sessions."


async def _tools(ctx: CommandContext, _args: str) -> str:
    report = await ctx.runtime.agent_tools()
    lines = [f"- {t.name} ({t.source}): {t.description.splitlines()[0] if t.description else ''}" for t in report.tools]
    lines += [
        f"server {s['name']} ({s['transport']}): {s['state']}" + (f": {s['error']}" if s["error"] else "")
        for s in report.servers
    ]
    lines += [f"dropped {d.name} ({d.source}): {d.reason}" for d in report.dropped]
    if report.sandbox is not None:
        lines.append(f"run_command sandbox: {report.sandbox.mode} ({report.sandbox.reason})")
    return "\n".join(lines)


def _input(hint: str) -> AvailableCommandInput:
    return AvailableCommandInput(root=UnstructuredCommandInput(hint=hint))


COMMANDS: dict[str, tuple[AvailableCommand, Handler]] = {
    "compact": (
        AvailableCommand(
            name="compact",
            description="Summarise the older history of this session to free context",
            input=_input("instructions for the summary (optional)"),
        ),
        _compact,
    ),
    "fork": (AvailableCommand(name="fork", description="Copy this session into a new one"), _fork),
    "sessions": (AvailableCommand(name="sessions", description="List the stored sessions"), _sessions),
    "tools": (AvailableCommand(name="tools", description="List the agent's tools and MCP servers"), _tools),
}
AVAILABLE = [command for command, _ in COMMANDS.values()]


@dataclass(frozen=True)
class ParsedCommand:
    name: str
    handler: Handler
    args: str


def parse_command(text: str) -> ParsedCommand | None:
    """The command a prompt runs and its argument text, or None when the prompt is for the model."""
    if not text.startswith("/"):
        return None
    name, *rest = text[1:].split(None, 1) or [""]
    entry = COMMANDS.get(name)
    return None if entry is None else ParsedCommand(name, entry[1], rest[0].strip() if rest else "")
