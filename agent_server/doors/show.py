"""What a client is shown of a turn, said once for every door: the conversation's items, and a line per event.

`Shown` is the protocol-neutral vocabulary of a conversation as a client draws it: text said by the user or
the agent, a tool call announced (pending: it may wait for its approval), running, ended (completed or
failed, with the content it gave), and the turn's usage. `shown` maps a live event to it; `transcript.py`
maps a stored session to the same items, so a door draws a replay exactly as it drew the turn live. A door
maps the items to its protocol (ACP: `session/update`s). `describe` is an event as one line of text (MCP
progress messages, task status lines).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agent_server.events import AgentEvent
from agent_server.types import ContentPart, TextPart, ToolCall, ToolKind, Usage, one_line


@dataclass(frozen=True)
class Said:
    role: Literal["user", "agent"]
    text: str


@dataclass(frozen=True)
class CallAnnounced:
    """A tool call the model asked for: pending until it runs (it may wait for the user's approval)."""

    call: ToolCall
    kind: ToolKind = "other"


@dataclass(frozen=True)
class CallRunning:
    call_id: str


@dataclass(frozen=True)
class CallEnded:
    call_id: str
    failed: bool
    content: list[ContentPart]


@dataclass(frozen=True)
class TurnUsage:
    usage: Usage


Shown = Said | CallAnnounced | CallRunning | CallEnded | TurnUsage


def shown(event: AgentEvent) -> Shown | None:
    """What a client is shown of a live event other than model text (which `stream.EventStream` coalesces);
    None: nothing (statuses, prompt traces, progress, compactions and errors are the record's)."""
    match event.type:
        case "tool_start":
            return CallAnnounced(event.call, event.kind)
        case "tool_running":
            return CallRunning(event.call_id)
        case "tool_result":
            return CallEnded(event.result.call_id, event.result.is_error, list(event.result.content))
        case "done":
            return TurnUsage(event.usage)
        case _:
            return None


def unfinished(call_id: str, status: str) -> CallEnded:
    """A call its turn announced but never ended (cancelled, cut by the turn's timeout): it failed."""
    return CallEnded(call_id, True, [TextPart(text=f"the turn ended {status} before this call finished")])


def describe(event: AgentEvent) -> str:  # noqa: C901 - one arm per event kind
    """A one-line human summary of an event, for progress messages."""
    match event.type:
        case "turn":
            return f"turn {event.turn_id} started"
        case "status":
            return event.message
        case "prompt_trace":
            tokens = sum(p.tokens for p in event.parts) + event.history_tokens + event.tool_schema_tokens
            return f"prompt: {len(event.parts)} part(s), ~{tokens} tokens"
        case "token":
            return one_line(f"text: {event.delta}")
        case "tool_start":
            return f"{event.call.name}: started"
        case "tool_running":
            return f"{event.name}: running"
        case "tool_progress":
            detail = event.message or (f"{event.progress:g}/{event.total:g}" if event.total else f"{event.progress:g}")
            return one_line(f"{event.name}: {detail}")
        case "tool_result":
            outcome = "error" if event.result.is_error else "ok"
            return f"{event.result.name}: {outcome} in {event.result.duration_s:.2f}s"
        case "compaction":
            r = event.record
            tokens = f"~{r.estimated_tokens_before} -> ~{r.estimated_tokens_after} tokens"
            return f"compacted {r.compacted_message_count} message(s) ({r.mode}), {tokens}"
        case "error":
            return one_line(f"error: {event.message}")
        case "done":
            return f"done: {event.status}"
