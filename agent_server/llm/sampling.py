"""The connected MCP client's own model, through `sampling/createMessage` (`--llm sampling`).

This module speaks the wire types (`mcp_types`) but not the SDK runtime: the server injects a
`SamplingRequester` bound to the request that runs the turn. With the client's `sampling.tools`
capability the agent's tools go along and tool calls come back as `tool_use` blocks; without it
the model samples without tools and earlier tool exchanges are rendered as text.
"""

from __future__ import annotations

import json

import mcp_types as types

from agent_server.errors import ModelError
from agent_server.llm.base import ModelRequest, ModelResponse, RetryCallback, TextCallback
from agent_server.turn_options import SamplingRequester
from agent_server.types import Message, StopReason, TextPart, ToolCall, ToolSpec, Usage

STOP_REASONS: dict[str, StopReason] = {
    "endTurn": "end_turn",
    "toolUse": "tool_use",
    "maxTokens": "max_tokens",
    "stopSequence": "stop_sequence",
}
"""MCP sampling's `stopReason` in the record's vocabulary (a client's own value maps to None)."""


class SamplingLLM:
    name = "sampling"

    def __init__(self, requester: SamplingRequester, *, with_tools: bool, max_tokens: int) -> None:
        self._requester = requester
        self._with_tools = with_tools
        self._max_tokens = max_tokens

    async def complete(
        self, request: ModelRequest, *, on_text: TextCallback | None = None, on_retry: RetryCallback | None = None
    ) -> ModelResponse:
        tools = request.tools if self._with_tools else []
        params = types.CreateMessageRequestParams(
            messages=to_sampling_messages(request.messages, tool_blocks=self._with_tools),
            system_prompt="\n\n".join(m.text() for m in request.messages if m.role == "system") or None,
            max_tokens=self._max_tokens,
            tools=[_wire_tool(t) for t in tools] or None,
            tool_choice=types.ToolChoice(mode="auto") if tools else None,
            model_preferences=types.ModelPreferences(hints=[types.ModelHint(name=request.model)])
            if request.model
            else None,
        )
        result = await self._requester.create_message(params)
        response = from_sampling_result(result)
        if on_text is not None and response.text:
            await on_text(response.text)
        return response


def to_sampling_messages(messages: list[Message], *, tool_blocks: bool) -> list[types.SamplingMessage]:
    """Our messages as sampling messages; consecutive tool results share one `user` message."""
    out: list[types.SamplingMessage] = []
    for message in messages:
        if message.role == "system":
            continue
        blocks = _blocks(message, tool_blocks=tool_blocks)
        role = "assistant" if message.role == "assistant" else "user"
        if message.role == "tool" and tool_blocks and out and _is_tool_results(out[-1]):
            out[-1] = types.SamplingMessage(role="user", content=[*out[-1].content_as_list, *blocks])
        elif blocks:
            out.append(types.SamplingMessage(role=role, content=blocks))
    return out


def from_sampling_result(result: types.CreateMessageResultWithTools) -> ModelResponse:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in result.content_as_list:
        if isinstance(block, types.TextContent):
            texts.append(block.text)
        elif isinstance(block, types.ToolUseContent):
            calls.append(ToolCall(id=block.id, name=block.name, arguments=dict(block.input)))
    if result.stop_reason == "toolUse" and not calls:
        raise ModelError("the client's model stopped for tool use but sent no tool_use block")
    stop = STOP_REASONS.get(result.stop_reason or "")
    return ModelResponse(text="".join(texts), tool_calls=calls, usage=Usage(), model=result.model, stop_reason=stop)


def _blocks(message: Message, *, tool_blocks: bool) -> list[types.SamplingMessageContentBlock]:
    if message.role == "tool":
        text = message.text()
        if tool_blocks:
            content: list[types.ContentBlock] = [types.TextContent(type="text", text=text)]
            return [
                types.ToolResultContent(type="tool_result", tool_use_id=message.tool_call_id or "", content=content)
            ]
        return [types.TextContent(type="text", text=f"[result of tool {message.name}]\n{text}")]
    blocks: list[types.SamplingMessageContentBlock] = [*_content_blocks(message)]
    for call in message.tool_calls:
        if tool_blocks:
            blocks.append(types.ToolUseContent(type="tool_use", id=call.id, name=call.name, input=call.arguments))
        else:
            rendered = f"[called tool {call.name} with {json.dumps(call.arguments, ensure_ascii=False)}]"
            blocks.append(types.TextContent(type="text", text=rendered))
    return blocks


def _content_blocks(message: Message) -> list[types.SamplingMessageContentBlock]:
    if isinstance(message.content, str):
        return [types.TextContent(type="text", text=message.content)] if message.content else []
    blocks: list[types.SamplingMessageContentBlock] = []
    for part in message.content:
        if isinstance(part, TextPart):
            blocks.append(types.TextContent(type="text", text=part.text))
        else:
            blocks.append(types.ImageContent(type="image", data=part.data, mime_type=part.mime_type))
    return blocks


def _is_tool_results(message: types.SamplingMessage) -> bool:
    return message.role == "user" and all(b.type == "tool_result" for b in message.content_as_list)


def _wire_tool(spec: ToolSpec) -> types.Tool:
    return types.Tool(name=spec.name, description=spec.description, input_schema=spec.input_schema)
