"""A stored session as a client replays it: the same `Shown` items its turns were drawn with live.

The latest compaction summary first (as the agent's text), then each live message in order: the user's text,
the agent's text, each tool call announced and ended (`failed` for an error, a refusal included, with the text
the call gave: the history's copy starts with the `Error: ` the model reads). Each slash command's turn (a turn
a door answered without the model, `TurnRecord.command`: never in the history) stands in its place among the
turns, as its prompt and its reply; those before the latest compaction are behind its summary.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping, Sequence

from agent_server.doors.show import CallAnnounced, CallEnded, Said, Shown
from agent_server.runtime import AgentRuntime
from agent_server.types import Message, SessionHistory, TextPart, ToolKind, TurnRecord

SUMMARY_HEADER = "Summary of the earlier conversation:\n\n"
ERROR_PREFIX = "Error: "
"""How a failed call's result starts in the history the model reads (`agent.tool_calls`)."""
TURNS_PAGE = 200


async def load_transcript(runtime: AgentRuntime, session_id: str) -> list[Shown]:
    """The session's transcript (see the module docstring).

    Raises:
        SessionNotFound: the session is unknown.
    """
    history = await runtime.history(session_id)
    turns: list[TurnRecord] = []
    cursor: str | None = None
    while True:
        page, cursor = await runtime.list_turns(session_id, cursor=cursor, limit=TURNS_PAGE)
        turns += page
        if cursor is None:
            break
    compacted = [c.created_at for c in await runtime.list_compactions(session_id) if not c.dry_run]
    kinds: dict[str, ToolKind] = {spec.name: spec.kind for spec in (await runtime.agent_tools()).tools}
    return list(transcript(history, turns, since=max(compacted, default=None), kinds=kinds))


def transcript(
    history: SessionHistory,
    turns: Sequence[TurnRecord] = (),
    since: str | None = None,
    kinds: Mapping[str, ToolKind] | None = None,
) -> Iterator[Shown]:
    """`history` shown, with the command turns among `turns` (the session's, in order) that began at or after
    `since` (the latest compaction) in their places; `kinds`: the kind of each tool offered now (a call of one
    that is not is `other`)."""
    if history.summary:
        yield Said("agent", SUMMARY_HEADER + history.summary)
    place = {turn.turn_id: index for index, turn in enumerate(turns)}
    commands = deque(
        (index, turn)
        for index, turn in enumerate(turns)
        if turn.command is not None and turn.started_at >= (since or "")
    )
    position = -1
    for stored in history.messages:
        position = place.get(stored.turn_id or "", position)
        while commands and commands[0][0] < position:
            yield from _command_turn(commands.popleft()[1])
        yield from _message(stored.message, kinds or {})
    for _, turn in commands:
        yield from _command_turn(turn)


def _message(message: Message, kinds: Mapping[str, ToolKind]) -> Iterator[Shown]:
    if message.role == "user":
        yield Said("user", message.text())
    elif message.role == "assistant":
        if message.text():
            yield Said("agent", message.text())
        yield from (CallAnnounced(call, kinds.get(call.name, "other")) for call in message.tool_calls)
    elif message.role == "tool" and message.tool_call_id is not None:
        content = message.content
        if isinstance(content, str):
            content = [TextPart(text=content.removeprefix(ERROR_PREFIX) if message.is_error else content)]
        yield CallEnded(message.tool_call_id, message.is_error, list(content))


def _command_turn(turn: TurnRecord) -> Iterator[Shown]:
    yield Said("user", turn.prompt)
    yield Said("agent", turn.final_text)
