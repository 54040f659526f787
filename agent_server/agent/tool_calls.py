"""One tool round: run the calls the model asked for and turn the results into messages.

The calls of a round run concurrently (the model asked for them together, so they are
independent); results keep the order of the calls. A call whose arguments were not valid
JSON is not run: the model gets an error result for it with the same call id. With an approval
gate, each call passes it first, in its own task: a call waiting for the user's answer holds no other
call, and a call the gate refuses is not run (the model reads why, as an error result).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import anyio

from agent_server.agent.approvals import ApprovalGate
from agent_server.agent.window import fit_calls, fit_result
from agent_server.approvals import approved_by_user, forwarding_to
from agent_server.events import (
    EventIds,
    EventSink,
    ToolProgressEvent,
    ToolResultEvent,
    ToolRunningEvent,
    ToolStartEvent,
    listening,
)
from agent_server.telemetry import NO_TELEMETRY, Telemetry
from agent_server.tools.base import Toolset, error_result
from agent_server.types import ContentPart, ImagePart, Message, TextPart, ToolCall, ToolKind, ToolResult

IMAGE_NOTE = (
    "Tool-provided image observation(s). Inspect these pixels as evidence for the active task; "
    "this is not a new user request."
)


async def run_tool_round(
    tools: Toolset,
    calls: list[ToolCall],
    *,
    tool_round: int,
    emit: EventSink,
    ids: EventIds,
    max_chars: int | None = None,
    shown: list[ToolCall] | None = None,
    gate: ApprovalGate | None = None,
    telemetry: Telemetry = NO_TELEMETRY,
    kinds: Mapping[str, ToolKind] | None = None,
) -> list[ToolResult]:
    """Run every call of one round concurrently; return the results in call order. `kinds`: each offered tool's
    kind, for the `tool_start` events.

    With `max_chars`, each result's text is cut to it (`window.fit_result`) before anyone sees it, and so
    are the arguments the `tool_start` events carry (`window.fit_calls`; the calls run with all of them), or
    `shown` holds the calls fitted already.
    """
    results: list[ToolResult | None] = [None] * len(calls)

    async def run_one(index: int, call: ToolCall) -> None:
        if listening(emit):
            await emit(ToolStartEvent(tool_round=tool_round, call=_shown(index, call), kind=_kind(call), **ids))
        with telemetry.tool(call) as traced:  # current while the call runs: mounted servers get its context
            result = await _call(tools, call, tool_round=tool_round, emit=emit, ids=ids, gate=gate)
            if max_chars is not None:
                result = fit_result(result, max_chars)
            traced.ended(result)
        results[index] = result
        if listening(emit):
            await emit(ToolResultEvent(tool_round=tool_round, result=result, **ids))

    def _shown(index: int, call: ToolCall) -> ToolCall:  # events keep what the record does
        if shown is not None:
            return shown[index]
        return call if max_chars is None else fit_calls([call], max_chars)[0]

    def _kind(call: ToolCall) -> ToolKind:
        return (kinds or {}).get(call.name, "other")

    async with anyio.create_task_group() as tg:
        for index, call in enumerate(calls):
            tg.start_soon(run_one, index, call)
    return [r for r in results if r is not None]


async def _call(
    tools: Toolset, call: ToolCall, *, tool_round: int, emit: EventSink, ids: EventIds, gate: ApprovalGate | None
) -> ToolResult:
    if call.arguments_error is not None:
        return error_result(call, f"invalid arguments for {call.name}: {call.arguments_error}; the tool was not run")
    if gate is not None and (refusal := await gate.check(call)) is not None:
        return error_result(call, refusal)
    if listening(emit):
        await emit(ToolRunningEvent(tool_round=tool_round, call_id=call.id, name=call.name, **ids))

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        event = ToolProgressEvent(
            call_id=call.id, name=call.name, progress=progress, total=total, message=message, **ids
        )
        await emit(event)

    forwarder = gate.forwarder() if gate is not None else None  # for a mounted server's elicitations
    with forwarding_to(forwarder), approved_by_user(gate is not None and gate.user_allowed(call.id)):
        return await tools.call_tool(call, on_progress=on_progress)  # timed by the registry


def result_messages(results: list[ToolResult]) -> list[Message]:
    """The `tool` messages for a round, then one `user` message carrying any images."""
    messages = [
        Message(role="tool", tool_call_id=r.call_id, name=r.name, content=_tool_message_text(r), is_error=r.is_error)
        for r in results
    ]
    images: list[ContentPart] = [part for r in results for part in r.content if isinstance(part, ImagePart)]
    if images:
        messages.append(Message(role="user", content=[TextPart(text=IMAGE_NOTE), *images]))
    return messages


def _tool_message_text(result: ToolResult) -> str:
    text = result.text()
    if not text and result.structured is not None:
        text = json.dumps(result.structured, ensure_ascii=False)
    if any(isinstance(part, ImagePart) for part in result.content):
        text = f"{text}\n[image attached in the next message]".strip()
    return f"Error: {text}" if result.is_error else text
