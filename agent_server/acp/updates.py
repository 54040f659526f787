"""What a client is shown (`doors.show`) as ACP `session/update` notifications: live turns and replays alike.

DESIGN 3.9: model text becomes `agent_message_chunk` (coalesced by `doors.stream`); a tool call becomes
`tool_call` (`pending`, a `kind`, the arguments as `rawInput`), then `tool_call_update` `in_progress` once it
runs (past its approval, when it was asked), then `tool_call_update` `completed` or `failed` with the result as
content (`failed` too for a call its turn left unfinished); the end of a turn becomes `usage_update` (the
turn's tokens against the context window, with its cost where known). The other events (status, prompt
trace, progress, compaction, errors) have no ACP update: the turn's record carries them. `session/load`
replays `doors.transcript` through the same mapping.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence

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
    UsageUpdate,
    UserMessageChunk,
)
from acp.schema import Usage as AcpUsage

from agent_server.doors.show import CallAnnounced, CallEnded, CallRunning, Said, Shown, TurnUsage, shown, unfinished
from agent_server.doors.stream import EventStream
from agent_server.events import AgentEvent, TokenEvent
from agent_server.types import ContentPart, ImagePart, Usage

Update = AgentMessageChunk | UserMessageChunk | ToolCallStart | ToolCallProgress | UsageUpdate | AvailableCommandsUpdate
SendUpdate = Callable[[Update], Awaitable[None]]

DETAIL_COUNTS = {"cache_read_tokens", "cache_write_tokens", "reasoning_tokens"}
"""The record's usage counts that `usage_update` carries in its `_meta`."""


class AcpShows:
    """`doors.stream.Shows` for ACP: each event's update (see the module docstring)."""

    def __init__(self, *, context_window: int) -> None:
        self._context_window = context_window

    def event(self, event: AgentEvent) -> Update | None:
        item = shown(event)
        return None if item is None else update_for(item, context_window=self._context_window)

    def text(self, token: TokenEvent) -> Update:
        return update_agent_message_text(token.delta)

    def unfinished(self, call_id: str, status: str) -> Update | None:
        return update_for(unfinished(call_id, status))


def turn_updates(send: SendUpdate, *, flush_interval: float, context_window: int) -> EventStream[Update]:
    """The `EventSink` of one prompt's turn, sending its updates."""
    return EventStream(AcpShows(context_window=context_window), send, flush_interval=flush_interval)


def update_for(item: Shown, *, context_window: int = 0) -> Update:
    """The update that shows `item` (`context_window`: the size a `usage_update` reports)."""
    match item:
        case Said(role="user", text=text):
            return update_user_message_text(text)
        case Said(text=text):
            return update_agent_message_text(text)
        case CallAnnounced(call=call, kind=kind):  # the tool's own kind (`ToolSpec.kind`): ACP's vocabulary
            return start_tool_call(call.id, call.name, kind=kind, status="pending", raw_input=call.arguments)
        case CallRunning(call_id=call_id):
            return update_tool_call(call_id, status="in_progress")
        case CallEnded(call_id=call_id, failed=failed, content=content):
            status = "failed" if failed else "completed"
            return update_tool_call(call_id, status=status, content=tool_result_content(content))
        case TurnUsage(usage=usage):
            return usage_update(usage, context_window)


def replay(items: Iterable[Shown]) -> list[Update]:
    """A stored session's transcript (`doors.transcript`) as updates, drawn as its turns were live."""
    return [update_for(item) for item in items]


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
