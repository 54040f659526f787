"""Handlers of the `session_*` and `agent_tools` tools: each maps params to `AgentRuntime` calls.

`active` in every session these return means "this connection's current session" (DESIGN 3.5).
"""

from __future__ import annotations

from dataclasses import asdict

from agent_server.doors.records import turn_view
from agent_server.runtime import AgentRuntime
from agent_server.server import tool_specs as specs
from agent_server.server.connections import connection_key
from agent_server.server.handlers import Context, Outcome
from agent_server.types import SessionInfo


def _describe(session: SessionInfo) -> str:
    active = " (current)" if session.active else ""
    return (
        f"{session.session_id}{active}: {session.title!r}, {session.turn_count} turn(s), updated {session.updated_at}"
    )


async def handle_create(runtime: AgentRuntime, ctx: Context, params: specs.SessionCreateParams) -> Outcome:
    session = await runtime.create_session(title=params.title, metadata=params.metadata, connection=connection_key(ctx))
    return Outcome(session, "created " + _describe(session))


async def handle_list(runtime: AgentRuntime, ctx: Context, params: specs.SessionListParams) -> Outcome:
    sessions, next_cursor = await runtime.list_sessions(
        cursor=params.cursor, limit=params.limit, connection=connection_key(ctx)
    )
    lines = [_describe(s) for s in sessions] or ["no sessions"]
    if next_cursor:
        lines.append(f"more: next_cursor={next_cursor}")
    return Outcome(specs.SessionListResult(sessions=sessions, next_cursor=next_cursor), "\n".join(lines))


async def handle_get(runtime: AgentRuntime, ctx: Context, params: specs.SessionGetParams) -> Outcome:
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
            specs.HistoryEntry(seq=m.seq, turn_id=m.turn_id, archived=archived, message=m.message)
            for m, archived in stored
        ]
    result = specs.SessionGetResult(
        **session.model_dump(),
        turns=[turn_view(turn, params.detail) for turn in turns],
        next_turns_cursor=next_cursor,
        summary=await runtime.summary(session_id),
        compactions=await runtime.list_compactions(session_id),
        history=history,
        next_history_cursor=next_history,
    )
    return Outcome(result, _describe(session))


async def handle_switch(runtime: AgentRuntime, ctx: Context, params: specs.SessionIdParams) -> Outcome:
    session = await runtime.switch_session(params.session_id, connection=connection_key(ctx))
    return Outcome(session, "switched to " + _describe(session))


async def handle_fork(runtime: AgentRuntime, ctx: Context, params: specs.SessionForkParams) -> Outcome:
    source = await runtime.session_or_current(params.session_id, connection=connection_key(ctx))
    session = await runtime.fork_session(source, at_turn=params.at_turn, title=params.title)
    return Outcome(session, f"forked {source} into " + _describe(session))


async def handle_delete(runtime: AgentRuntime, ctx: Context, params: specs.SessionIdParams) -> Outcome:
    await runtime.delete_session(params.session_id)
    result = specs.SessionDeleteResult(session_id=params.session_id, deleted=True)
    return Outcome(result, f"deleted {params.session_id}")


async def handle_agent_tools(runtime: AgentRuntime, ctx: Context, params: specs.AgentToolsParams) -> Outcome:
    report = await runtime.agent_tools()
    lines = [f"{t.name} ({t.source})" for t in report.tools]
    servers = [specs.MountState.model_validate(s) for s in report.servers]
    lines += [f"server {s.name} ({s.transport}): {s.state}, {s.tool_count} tool(s)" for s in servers]
    lines += [f"dropped {d.name} ({d.source}): {d.reason}" for d in report.dropped]
    sandbox = None if report.sandbox is None else specs.CommandSandboxState.model_validate(asdict(report.sandbox))
    if sandbox is not None:
        lines.append(f"run_command sandbox: {sandbox.mode} ({sandbox.reason})")
    result = specs.AgentToolsResult(tools=report.tools, servers=servers, dropped=report.dropped, sandbox=sandbox)
    return Outcome(result, "\n".join(lines) or "no tools")
