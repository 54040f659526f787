"""The session tools, each registered once with its models: `session_create`, `session_list`, `session_get`,
`session_switch`, `session_fork`, `session_delete`, and `agent_tools`.

`active` in every session these return means "this connection's current session" (DESIGN 3.5).
"""

# No `from __future__ import annotations`: pydantic would compile every annotation string at import, and
# `tool` reads the params models from the handlers' annotations.

from dataclasses import asdict
from typing import Any, Literal

from pydantic import Field

from agent_server.doors.records import DETAIL_HELP, Detail, TurnView, turn_view
from agent_server.runtime import AgentRuntime
from agent_server.server.connections import connection_key
from agent_server.server.tool_kit import MAX_PAGE, Context, Outcome, Params, Result, hints, tool
from agent_server.types import CompactionRecord, DroppedTool, Message, SessionInfo, ToolSpec


class SessionCreateParams(Params):
    title: str | None = Field(default=None, max_length=200)
    metadata: dict[str, Any] | None = None


class SessionListParams(Params):
    cursor: str | None = None
    limit: int = Field(default=50, ge=1, le=MAX_PAGE)


class SessionListResult(Result):
    sessions: list[SessionInfo]
    next_cursor: str | None = None


class SessionGetParams(Params):
    session_id: str | None = Field(default=None, description="Default: this connection's current session.")
    turns_cursor: str | None = None
    turns_limit: int = Field(default=20, ge=1, le=MAX_PAGE)
    include_history: bool = Field(default=False, description="Also return one page of the stored messages.")
    history_cursor: str | None = Field(
        default=None, description="`next_history_cursor` of the previous page; implies include_history."
    )
    history_limit: int = Field(default=50, ge=1, le=MAX_PAGE, description="Messages per history page.")
    detail: Detail = Field(default="summary", description="How much of each turn: " + DETAIL_HELP)


class HistoryEntry(Result):
    seq: int
    turn_id: str | None
    archived: bool
    message: Message


class SessionGetResult(SessionInfo):
    turns: list[TurnView]
    next_turns_cursor: str | None = None
    summary: str | None = None
    compactions: list[CompactionRecord]
    history: list[HistoryEntry] | None = None
    next_history_cursor: str | None = None


class SessionIdParams(Params):
    session_id: str = Field(min_length=1)


class SessionForkParams(Params):
    session_id: str | None = Field(default=None, description="Default: this connection's current session.")
    at_turn: str | None = Field(default=None, description="Turn id to fork after; default the latest.")
    title: str | None = Field(default=None, max_length=200)


class SessionDeleteResult(Result):
    session_id: str
    deleted: bool


class AgentToolsParams(Params):
    pass


class MountState(Result):
    name: str
    transport: str
    state: str
    error: str | None = None
    tool_count: int = 0


class CommandSandboxState(Result):
    mode: Literal["bwrap", "none", "refused"] = Field(
        description="bwrap: run_command runs in a bubblewrap sandbox; none: without one; refused: commands are "
        "refused (tools.sandbox is bwrap and bwrap does not work here)."
    )
    reason: str = Field(description="Why this mode, e.g. 'bwrap not found on PATH (install bubblewrap)'.")
    network: bool = Field(description="Whether a command can reach the network.")


class AgentToolsResult(Result):
    tools: list[ToolSpec]
    servers: list[MountState]
    dropped: list[DroppedTool] = Field(
        default_factory=list[DroppedTool], description="Tools not offered to the model (name clash, invalid schema)."
    )
    sandbox: CommandSandboxState | None = Field(
        default=None, description="Where run_command runs; absent when run_command is off."
    )


def _describe(session: SessionInfo) -> str:
    active = " (current)" if session.active else ""
    return (
        f"{session.session_id}{active}: {session.title!r}, {session.turn_count} turn(s), updated {session.updated_at}"
    )


@tool(
    "session_create",
    "Create a session and make it this connection's current session.",
    result=SessionInfo,
    annotations=hints("Create a session", read_only=False),
)
async def session_create(runtime: AgentRuntime, ctx: Context, params: SessionCreateParams) -> Outcome:
    session = await runtime.create_session(title=params.title, metadata=params.metadata, connection=connection_key(ctx))
    return Outcome(session, "created " + _describe(session))


@tool(
    "session_list",
    "List sessions, newest first (paged); `active` marks this connection's current session.",
    result=SessionListResult,
    annotations=hints("List sessions", read_only=True),
)
async def session_list(runtime: AgentRuntime, ctx: Context, params: SessionListParams) -> Outcome:
    sessions, next_cursor = await runtime.list_sessions(
        cursor=params.cursor, limit=params.limit, connection=connection_key(ctx)
    )
    lines = [_describe(s) for s in sessions] or ["no sessions"]
    if next_cursor:
        lines.append(f"more: next_cursor={next_cursor}")
    return Outcome(SessionListResult(sessions=sessions, next_cursor=next_cursor), "\n".join(lines))


@tool(
    "session_get",
    "A session's summary, its turns (paged; summaries unless detail `full`), compaction records and "
    "optionally its message history.",
    result=SessionGetResult,
    annotations=hints("Inspect a session", read_only=True),
)
async def session_get(runtime: AgentRuntime, ctx: Context, params: SessionGetParams) -> Outcome:
    connection = connection_key(ctx)
    session_id = await runtime.session_or_current(params.session_id, connection=connection)
    session = await runtime.get_session(session_id, connection=connection)
    turns, next_cursor = await runtime.list_turns(session_id, cursor=params.turns_cursor, limit=params.turns_limit)
    history, next_history = None, None
    if params.include_history or params.history_cursor is not None:
        stored, next_history = await runtime.list_messages(
            session_id, cursor=params.history_cursor, limit=params.history_limit
        )
        history = [
            HistoryEntry(seq=m.seq, turn_id=m.turn_id, archived=archived, message=m.message) for m, archived in stored
        ]
    result = SessionGetResult(
        **session.model_dump(),
        turns=[turn_view(turn, params.detail) for turn in turns],
        next_turns_cursor=next_cursor,
        summary=await runtime.summary(session_id),
        compactions=await runtime.list_compactions(session_id),
        history=history,
        next_history_cursor=next_history,
    )
    return Outcome(result, _describe(session))


@tool(
    "session_switch",
    "Make a session this connection's current session (other connections keep theirs).",
    result=SessionInfo,
    annotations=hints("Switch session", read_only=False, idempotent=True),
)
async def session_switch(runtime: AgentRuntime, ctx: Context, params: SessionIdParams) -> Outcome:
    session = await runtime.switch_session(params.session_id, connection=connection_key(ctx))
    return Outcome(session, "switched to " + _describe(session))


@tool(
    "session_fork",
    "Copy a session's history up to a turn into a new session.",
    result=SessionInfo,
    annotations=hints("Fork a session", read_only=False),
)
async def session_fork(runtime: AgentRuntime, ctx: Context, params: SessionForkParams) -> Outcome:
    source = await runtime.session_or_current(params.session_id, connection=connection_key(ctx))
    session = await runtime.fork_session(source, at_turn=params.at_turn, title=params.title)
    return Outcome(session, f"forked {source} into " + _describe(session))


@tool(
    "session_delete",
    "Delete a session and everything stored for it.",
    result=SessionDeleteResult,
    annotations=hints("Delete a session", read_only=False, destructive=True, idempotent=True),
)
async def session_delete(runtime: AgentRuntime, ctx: Context, params: SessionIdParams) -> Outcome:
    await runtime.delete_session(params.session_id)
    result = SessionDeleteResult(session_id=params.session_id, deleted=True)
    return Outcome(result, f"deleted {params.session_id}")


@tool(
    "agent_tools",
    "The agent's own tools (with their source) and the state of each mounted MCP server.",
    result=AgentToolsResult,
    annotations=hints("List the agent's tools", read_only=True),
)
async def agent_tools(runtime: AgentRuntime, ctx: Context, params: AgentToolsParams) -> Outcome:
    report = await runtime.agent_tools()
    lines = [f"{t.name} ({t.source})" for t in report.tools]
    servers = [MountState.model_validate(s) for s in report.servers]
    lines += [f"server {s.name} ({s.transport}): {s.state}, {s.tool_count} tool(s)" for s in servers]
    lines += [f"dropped {d.name} ({d.source}): {d.reason}" for d in report.dropped]
    sandbox = None if report.sandbox is None else CommandSandboxState.model_validate(asdict(report.sandbox))
    if sandbox is not None:
        lines.append(f"run_command sandbox: {sandbox.mode} ({sandbox.reason})")
    result = AgentToolsResult(tools=report.tools, servers=servers, dropped=report.dropped, sandbox=sandbox)
    return Outcome(result, "\n".join(lines) or "no tools")
