"""Turn events -> ACP `session/update` notifications, and a stored history replayed as updates.

DESIGN 3.9: model text becomes `agent_message_chunk` (token deltas coalesced: buffered and sent at most
every `flush_interval` seconds, and always before the next other update); a tool call becomes
`tool_call` (`pending`, a `kind`, the arguments as `rawInput`), then `tool_call_update` `in_progress` once it
runs (past its approval, when it was asked); its result becomes
`tool_call_update` (`completed` or `failed`, the result as content); the end of a turn becomes
`usage_update` (the turn's tokens against the context window, with its cost where known).
The other events (status, prompt trace, progress, compaction, errors) have no ACP update: the
turn's record carries them.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Sequence

from acp.helpers import (
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_available_commands,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import (
    AgentMessageChunk,
    AvailableCommand,
    AvailableCommandsUpdate,
    ContentToolCallContent,
    Cost,
    ImageContentBlock,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    ToolKind,
    UsageUpdate,
    UserMessageChunk,
)
from acp.schema import Usage as AcpUsage

from agent_server.events import (
    AgentEvent,
    DoneEvent,
    TokenEvent,
    ToolResultEvent,
    ToolRunningEvent,
    ToolStartEvent,
    TurnEvent,
)
from agent_server.types import (
    ContentPart,
    ImagePart,
    Message,
    SessionHistory,
    TextPart,
    ToolCall,
    ToolResult,
    TurnRecord,
    Usage,
)

Update = AgentMessageChunk | UserMessageChunk | ToolCallStart | ToolCallProgress | UsageUpdate | AvailableCommandsUpdate
SendUpdate = Callable[[Update], Awaitable[None]]

TOOL_KINDS: dict[str, ToolKind] = {
    "read_file": "read",
    "list_dir": "read",
    "search_text": "search",
    "write_file": "edit",
    "edit_file": "edit",
    "run_command": "execute",
}
"""The ACP kind of each built-in tool; every other tool (mounted, plugins) is `other`."""

SUMMARY_HEADER = "Summary of the earlier conversation:\n\n"
DETAIL_COUNTS = {"cache_read_tokens", "cache_write_tokens", "reasoning_tokens"}
"""The record's usage counts that `usage_update` carries in its `_meta`."""
ERROR_PREFIX = "Error: "
"""How a failed call's result starts in the history the model reads (`agent.tool_calls`)."""


def tool_kind(name: str) -> ToolKind:
    return TOOL_KINDS.get(name, "other")


def tool_call_start(call: ToolCall) -> ToolCallStart:
    """A call as announced: `pending` until it runs (ACP: awaiting approval, or not started)."""
    return start_tool_call(call.id, call.name, kind=tool_kind(call.name), status="pending", raw_input=call.arguments)


def tool_call_running(call_id: str) -> ToolCallProgress:
    return update_tool_call(call_id, status="in_progress")


def tool_call_done(result: ToolResult) -> ToolCallProgress:
    status = "failed" if result.is_error else "completed"
    return update_tool_call(result.call_id, status=status, content=tool_result_content(result.content))


def tool_result_content(parts: Sequence[ContentPart]) -> list[ContentToolCallContent]:
    return [tool_content(_block(part)) for part in parts]


def _block(part: ContentPart) -> ImageContentBlock | TextContentBlock:
    if isinstance(part, ImagePart):
        return ImageContentBlock(type="image", data=part.data, mime_type=part.mime_type)
    return text_block(part.text)


def usage_update(usage: Usage, context_window: int) -> UsageUpdate:
    """The turn's tokens against the context window, its cost where known; the schema has no place for the cache
    and reasoning counts in this update, so they ride in its `_meta` (the prompt's `usage` has them in place)."""
    cost = None if usage.cost_usd is None else Cost(amount=usage.cost_usd, currency="USD")
    used = usage.total_tokens or 0
    meta = {"agent_server": {"usage": usage.model_dump(include=DETAIL_COUNTS)}}
    return UsageUpdate(session_update="usage_update", used=used, size=context_window, cost=cost, field_meta=meta)


def prompt_usage(usage: Usage) -> AcpUsage:
    """A turn's usage as a prompt's answer carries it (ACP `Usage`: the cache and reasoning counts have a place)."""
    return AcpUsage(
        total_tokens=usage.total_tokens or 0,
        input_tokens=usage.prompt_tokens or 0,
        output_tokens=usage.completion_tokens or 0,
        cached_read_tokens=usage.cache_read_tokens,
        cached_write_tokens=usage.cache_write_tokens,
        thought_tokens=usage.reasoning_tokens,
    )


def commands_update(commands: Sequence[AvailableCommand]) -> AvailableCommandsUpdate:
    return update_available_commands(list(commands))


class TurnUpdates:
    """An `EventSink` for one turn that sends its events as updates; see the module docstring.

    Remembers the turn's id (from its first event), so that a cancelled turn's record can be read back.
    """

    def __init__(self, send: SendUpdate, *, flush_interval: float, context_window: int) -> None:
        self._send = send
        self._flush_interval = flush_interval
        self._context_window = context_window
        self._pending: list[str] = []
        self._last_flush = -math.inf  # never flushed: the first delta goes at once, whatever the clock reads
        self._open: dict[str, None] = {}
        """The calls announced and not ended yet, in order."""
        self.turn_id: str | None = None

    async def __call__(self, event: AgentEvent) -> None:
        if isinstance(event, TurnEvent):
            self.turn_id = event.turn_id
        elif isinstance(event, ToolStartEvent):
            self._open[event.call.id] = None
        elif isinstance(event, ToolResultEvent):
            self._open.pop(event.result.call_id, None)
        if isinstance(event, TokenEvent):
            self._pending.append(event.delta)
            if time.monotonic() - self._last_flush >= self._flush_interval:
                await self.flush()
            return
        update = _update_for(event, self._context_window)
        if update is not None:
            await self.flush()
            await self._send(update)

    async def flush(self) -> None:
        """Send the text buffered so far, as one chunk."""
        self._last_flush = time.monotonic()
        if not self._pending:
            return
        text, self._pending = "".join(self._pending), []
        await self._send(update_agent_message_text(text))

    async def end(self, status: str) -> None:
        """The turn ended (`status`): send the buffered text, and `failed` for each call it announced that never
        ended (cancelled, or cut by the turn's timeout, while it ran or waited for its permission)."""
        await self.flush()
        open_calls, self._open = list(self._open), {}
        for call_id in open_calls:
            text = f"the turn ended {status} before this call finished"
            await self._send(update_tool_call(call_id, status="failed", content=[tool_content(text_block(text))]))


def _update_for(event: AgentEvent, context_window: int) -> Update | None:
    if isinstance(event, ToolStartEvent):
        return tool_call_start(event.call)
    if isinstance(event, ToolRunningEvent):
        return tool_call_running(event.call_id)
    if isinstance(event, ToolResultEvent):
        return tool_call_done(event.result)
    if isinstance(event, DoneEvent):
        return usage_update(event.usage, context_window)
    return None


def replay(history: SessionHistory, turns: Sequence[TurnRecord] = (), since: str | None = None) -> Iterator[Update]:
    """The session's live history as the updates a client shows: the compaction summary first, then each message
    (user text, agent text, each tool call and its result), with each slash command's turn among `turns` (the
    session's, in order) in its place: its prompt and its reply, unless it ran before the compaction at `since`."""
    if history.summary:
        yield update_agent_message_text(SUMMARY_HEADER + history.summary)
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
        yield from _message_updates(stored.message)
    for _, turn in commands:
        yield from _command_turn(turn)


def _message_updates(message: Message) -> Iterator[Update]:
    if message.role == "user":
        yield update_user_message_text(message.text())
    elif message.role == "assistant":
        if message.text():
            yield update_agent_message_text(message.text())
        yield from (tool_call_start(call) for call in message.tool_calls)
    elif message.role == "tool" and message.tool_call_id is not None:
        yield _replayed_result(message)


def _command_turn(turn: TurnRecord) -> Iterator[Update]:
    yield update_user_message_text(turn.prompt)
    yield update_agent_message_text(turn.final_text)


def _replayed_result(message: Message) -> ToolCallProgress:
    """A stored tool message as its call ended live: `failed` for an error (a refusal included), with the text
    the call gave (the history's copy starts with the `Error: ` the model reads)."""
    assert message.tool_call_id is not None
    content = message.content
    if isinstance(content, str):
        content = [TextPart(text=content.removeprefix(ERROR_PREFIX) if message.is_error else content)]
    status = "failed" if message.is_error else "completed"
    return update_tool_call(message.tool_call_id, status=status, content=tool_result_content(content))
