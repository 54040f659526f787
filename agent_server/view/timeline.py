"""What the page shows of sessions and turns, as plain JSON: every stored string escaped and capped here.

A turn is a timeline of steps, in the order they ran: each model call (its phase, duration, usage, answer text)
and each tool round (its calls, with their arguments, results, durations and approvals). The calls a running
turn's model asked for and that have no result yet are shown `running`. Every text that came from a model, a
tool, a mounted server or a client is hostile: it is escaped as every approval channel escapes it (control,
zero-width and bidi characters shown as `\\u200b`, `\\x1b`; `agent_server.presentation.escape`) and cut at
`TEXT_CAP` characters with the number of characters hidden, and the page renders it as text, never as HTML.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from agent_server.presentation import escape
from agent_server.types import ApprovalRecord, AssistantTurn, SessionInfo, ToolCall, ToolResult, TurnRecord, Usage

TEXT_CAP = 20_000
"""The most characters the page shows of one argument set, result or answer (the full record has the rest)."""
PROMPT_CAP = 300
"""The most characters of a prompt in a list of turns."""
RECORD_CAP = 2_000_000
"""The most characters of a full record the page shows (`record_text`)."""


def shown(text: str, cap: int = TEXT_CAP) -> dict[str, Any]:
    """`{"text", "hidden"}`: `text` escaped and cut at `cap` characters, and how many characters are not shown."""
    out, used = escape(text, newlines=True, limit=cap)
    return {"text": out, "hidden": len(text) - used}


def session_item(session: SessionInfo) -> dict[str, Any]:
    agent = session.metadata.get("agent")
    return {
        "session_id": session.session_id,
        "title": shown(session.title, PROMPT_CAP),
        "agent": shown(agent, PROMPT_CAP) if isinstance(agent, str) else None,
        "created_at": session.created_at,
        "updated_at": session.updated_at,
        "turn_count": session.turn_count,
    }


def turn_item(record: TurnRecord) -> dict[str, Any]:
    """A turn in a session's list: what it was asked, how it ended, what it cost."""
    return {
        "turn_id": record.turn_id,
        "status": record.status,
        "prompt": shown(record.prompt, PROMPT_CAP),
        "started_at": record.started_at,
        "finished_at": record.finished_at,
        "duration_s": _wall_s(record),
        "model_calls": len(record.assistant_turns),
        "tool_calls": sum(len(r.tool_results) for r in record.tool_rounds),
        "usage": _usage(record.usage),
    }


def timeline(record: TurnRecord) -> dict[str, Any]:
    """The turn as the page draws it (see the module docstring)."""
    approvals = {a.call_id: a for a in record.approvals}
    rounds = {r.tool_round: r for r in record.tool_rounds}
    steps: list[dict[str, Any]] = []
    for index, model_call in enumerate(record.assistant_turns):
        steps.append(_model_step(model_call))
        if not model_call.tool_calls:
            continue
        number = index + 1
        done = rounds.get(number)
        results = {r.call_id: r for r in done.tool_results} if done is not None else {}
        calls = done.requested_tools if done is not None else model_call.tool_calls
        steps.append(
            {
                "kind": "tools",
                "round": number,
                "calls": [_call(call, results.get(call.id), approvals.get(call.id)) for call in calls],
            }
        )
    return {
        **turn_item(record),
        "prompt": shown(record.prompt),
        "final_text": shown(record.final_text),
        "error": None if record.error is None else {"type": record.error.type, "message": shown(record.error.message)},
        "model": record.model,
        "steps": steps,
        "approvals": [_approval(a) for a in record.approvals],
    }


def record_text(record: TurnRecord) -> dict[str, Any]:
    """The whole stored record as indented JSON, escaped, cut at `RECORD_CAP` characters."""
    text = json.dumps(record.model_dump(mode="json", by_alias=True), indent=2, ensure_ascii=False)
    return shown(text, RECORD_CAP)


def _model_step(model_call: AssistantTurn) -> dict[str, Any]:
    return {
        "kind": "model",
        "phase": model_call.phase,
        "duration_s": model_call.duration_s,
        "stop_reason": model_call.stop_reason,
        "text": shown(model_call.text),
        "tool_names": [call.name for call in model_call.tool_calls],
        "usage": None if model_call.usage is None else _usage(model_call.usage),
    }


def _call(call: ToolCall, result: ToolResult | None, approval: ApprovalRecord | None) -> dict[str, Any]:
    arguments = json.dumps(call.arguments, indent=2, ensure_ascii=False)
    return {
        "call_id": call.id,
        "name": call.name,
        "arguments": shown(arguments),
        "arguments_error": call.arguments_error,
        "status": "running" if result is None else ("error" if result.is_error else "ok"),
        "duration_s": None if result is None else result.duration_s,
        "result": None if result is None else shown(_result_text(result)),
        "approval": None if approval is None else _approval(approval),
    }


def _result_text(result: ToolResult) -> str:
    text = result.text()
    if result.structured is not None and not text:
        text = json.dumps(result.structured, indent=2, ensure_ascii=False)
    return text


def _approval(approval: ApprovalRecord) -> dict[str, Any]:
    return {
        "call_id": approval.call_id,
        "tool": approval.tool,
        "channel": approval.channel,
        "decision": approval.decision,
        "latency_s": approval.latency_s,
    }


def _usage(usage: Usage) -> dict[str, Any]:
    return usage.model_dump(exclude_none=True)


def _wall_s(record: TurnRecord) -> float | None:
    if record.finished_at is None:
        return None
    try:
        started = datetime.fromisoformat(record.started_at)
        finished = datetime.fromisoformat(record.finished_at)
    except ValueError:
        return None
    return round((finished - started).total_seconds(), 3)
