"""Handlers of the `session_*` and `agent_tools` tools.

`active` in every session these return means "this connection's current session" (DESIGN 3.5).
"""

from __future__ import annotations

from agent_server.server import tool_specs as specs
from agent_server.server.handlers import Context, Outcome
from agent_server.server.state import AppState
from agent_server.types import SessionInfo


def _describe(session: SessionInfo) -> str:
    active = " (current)" if session.active else ""
    return (
        f"{session.session_id}{active}: {session.title!r}, {session.turn_count} turn(s), updated {session.updated_at}"
    )


async def handle_create(state: AppState, ctx: Context, params: specs.SessionCreateParams) -> Outcome:
    session = await state.create_session(ctx, title=params.title or "Untitled session", metadata=params.metadata or {})
    return Outcome(session, "created " + _describe(session))


async def handle_list(state: AppState, ctx: Context, params: specs.SessionListParams) -> Outcome:
    sessions, next_cursor = await state.store.list_sessions(cursor=params.cursor, limit=params.limit)
    sessions = [state.marked(ctx, s) for s in sessions]
    lines = [_describe(s) for s in sessions] or ["no sessions"]
    if next_cursor:
        lines.append(f"more: next_cursor={next_cursor}")
    return Outcome(specs.SessionListResult(sessions=sessions, next_cursor=next_cursor), "\n".join(lines))


async def handle_get(state: AppState, ctx: Context, params: specs.SessionGetParams) -> Outcome:
    session_id = await state.session_or_current(ctx, params.session_id)
    session = state.marked(ctx, await state.store.get_session(session_id))
    turns, next_cursor = await state.store.list_turns(session_id, cursor=params.turns_cursor, limit=params.turns_limit)
    compactions = await state.store.list_compactions(session_id)
    history, next_history = None, None
    if params.include_history or params.history_cursor is not None:
        stored, next_history = await state.store.list_messages(
            session_id, cursor=params.history_cursor, limit=params.history_limit
        )
        history = [
            specs.HistoryEntry(seq=m.seq, turn_id=m.turn_id, archived=archived, message=m.message)
            for m, archived in stored
        ]
    summary = (await state.store.load_history(session_id)).summary
    result = specs.SessionGetResult(
        **session.model_dump(),
        turns=[specs.TurnResult.of(turn, params.detail) for turn in turns],
        next_turns_cursor=next_cursor,
        summary=summary,
        compactions=compactions,
        history=history,
        next_history_cursor=next_history,
    )
    return Outcome(result, _describe(session))


async def handle_switch(state: AppState, ctx: Context, params: specs.SessionIdParams) -> Outcome:
    session = state.make_current(ctx, await state.store.get_session(params.session_id))
    return Outcome(session, "switched to " + _describe(session))


async def handle_fork(state: AppState, ctx: Context, params: specs.SessionForkParams) -> Outcome:
    source = await state.session_or_current(ctx, params.session_id)
    session = await state.store.fork_session(source, at_turn=params.at_turn, title=params.title)
    return Outcome(session, f"forked {source} into " + _describe(session))


async def handle_delete(state: AppState, ctx: Context, params: specs.SessionIdParams) -> Outcome:
    await state.store.delete_session(params.session_id)
    state.current.forget(params.session_id)
    result = specs.SessionDeleteResult(session_id=params.session_id, deleted=True)
    return Outcome(result, f"deleted {params.session_id}")


async def handle_agent_tools(state: AppState, ctx: Context, params: specs.AgentToolsParams) -> Outcome:
    tools = await state.registry.list_tools()
    lines = [f"{t.name} ({t.source})" for t in tools]
    servers = [specs.MountState.model_validate(s) for s in state.mounts.states()]
    lines += [f"server {s.name} ({s.transport}): {s.state}, {s.tool_count} tool(s)" for s in servers]
    dropped = state.registry.dropped()
    lines += [f"dropped {d.name} ({d.source}): {d.reason}" for d in dropped]
    result = specs.AgentToolsResult(tools=tools, servers=servers, dropped=dropped)
    return Outcome(result, "\n".join(lines) or "no tools")
