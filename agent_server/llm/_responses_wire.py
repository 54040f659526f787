"""The OpenAI Responses wire format: request bodies out, answers (output items) in.

Stateless: `store: false` with `include: ["reasoning.encrypted_content"]`, so that a reasoning model's
reasoning items come back encrypted and can be sent again as input in the following rounds of the turn
(`ModelResponse.native` holds the output items in order; `map_input` sends them back unchanged).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_server.llm._openai_wire import obj, output_format, parse_arguments, seq
from agent_server.llm.base import ModelRequest, ModelResponse
from agent_server.llm.prices import price_for, priced
from agent_server.settings import OpenAIOptions, Price
from agent_server.types import ImagePart, Message, NativeContent, StopReason, TextPart, ToolCall, ToolSpec, Usage

API = "openai-responses"
INCOMPLETE_REASONS: dict[str, StopReason] = {"max_output_tokens": "max_tokens", "content_filter": "content_filter"}


# --- request ------------------------------------------------------------------------------


def build_body(request: ModelRequest, *, model: str, options: OpenAIOptions, cache_key: bool) -> dict[str, Any]:
    """The JSON body of a `POST /responses` for `request`; `cache_key` sends the session id as `prompt_cache_key`."""
    body: dict[str, Any] = {"model": model}
    system = "\n\n".join(m.text() for m in request.messages if m.role == "system")
    if system:
        body["instructions"] = system
    body["input"] = map_input([m for m in request.messages if m.role != "system"])
    if request.tools:
        body["tools"] = [map_tool(tool) for tool in request.tools]
        body["tool_choice"] = "auto"
    if request.output_schema is not None:
        body["text"] = {"format": {"type": "json_schema", **output_format(request.output_schema)}}
    body["store"] = False
    body["include"] = ["reasoning.encrypted_content"]
    if cache_key and request.session_id:
        body["prompt_cache_key"] = request.session_id
    sampling = {"max_output_tokens": options.max_tokens, "temperature": options.temperature}
    body.update({key: value for key, value in sampling.items() if value is not None})
    body.update(options.extra_body)
    body["stream"] = options.stream
    return body


def map_tool(tool: ToolSpec) -> dict[str, Any]:
    wire: dict[str, Any] = {"type": "function", "name": tool.name}
    if tool.description:
        wire["description"] = tool.description
    wire["parameters"] = tool.input_schema
    wire["strict"] = False  # our schemas are not all strict-mode schemas
    return wire


def map_input(messages: list[Message]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            items.append(
                {"type": "function_call_output", "call_id": message.tool_call_id or "", "output": message.text()}
            )
        elif message.role == "assistant":
            items += _assistant_items(message)
        elif (content := _user_content(message.content)) is not None:
            items.append({"role": "user", "content": content})
    return items


def _assistant_items(message: Message) -> list[dict[str, Any]]:
    if message.native is not None and message.native.api == API:
        return list(message.native.content)  # reasoning items go back exactly as they came, in order
    items: list[dict[str, Any]] = []
    if message.text():
        items.append({"role": "assistant", "content": message.text()})
    for call in message.tool_calls:
        arguments = json.dumps(call.arguments)
        items.append({"type": "function_call", "call_id": call.id, "name": call.name, "arguments": arguments})
    return items


def _user_content(content: str | list[TextPart | ImagePart]) -> str | list[dict[str, Any]] | None:
    if isinstance(content, str):
        return content or None
    if all(isinstance(part, TextPart) for part in content):
        return "\n".join(part.text for part in content if isinstance(part, TextPart)) or None
    return [
        {"type": "input_text", "text": p.text}
        if isinstance(p, TextPart)
        else {"type": "input_image", "image_url": f"data:{p.mime_type};base64,{p.data}"}
        for p in content
    ]


# --- response -----------------------------------------------------------------------------


@dataclass
class ResponsesAnswer:
    """One answer as read off the wire: its output items by index, the final status and usage."""

    items: dict[int, dict[str, Any]] = field(default_factory=dict[int, dict[str, Any]])
    text: list[str] = field(default_factory=list[str])
    """Text deltas as they streamed (a whole answer's text is read from its items)."""
    reasoning: list[str] = field(default_factory=list[str])
    status: str = ""
    incomplete_reason: str = ""
    usage: dict[str, Any] = field(default_factory=dict[str, Any])
    model: str | None = None

    def full_text(self) -> str:
        return "".join(self.text) if self.text else _items_text(self.ordered())

    def ordered(self) -> list[dict[str, Any]]:
        return [self.items[i] for i in sorted(self.items)]

    def to_response(self, requested_model: str, prices: Mapping[str, Price]) -> ModelResponse:
        model = self.model or requested_model
        items = self.ordered()
        calls = [_tool_call(item) for item in items if item.get("type") == "function_call"]
        summaries = [
            _str(obj(part).get("text"))
            for item in items
            if item.get("type") == "reasoning"
            for part in seq(item.get("summary"))
        ]
        reasoning = "".join(self.reasoning) or "\n".join(s for s in summaries if s)
        native = NativeContent(api=API, content=items) if any(i.get("type") == "reasoning" for i in items) else None
        if self.status == "incomplete":
            stop = INCOMPLETE_REASONS.get(self.incomplete_reason)
        else:
            stop: StopReason | None = "tool_use" if calls else ("end_turn" if self.status == "completed" else None)
        return ModelResponse(
            text=_items_text(items) or "".join(self.text),
            tool_calls=calls,
            reasoning=reasoning or None,
            usage=_usage(self.usage, price_for(model, prices) or price_for(requested_model, prices)),
            model=model,
            stop_reason=stop,
            native=native,
        )

    def finish(self, response: dict[str, Any]) -> None:
        """The closing `response` object (of `response.completed`/`incomplete`, or a whole answer)."""
        self.status = _str(response.get("status")) or self.status
        self.incomplete_reason = _str(obj(response.get("incomplete_details")).get("reason"))
        self.usage = obj(response.get("usage")) or self.usage
        self.model = _str(response.get("model")) or self.model
        for index, item in enumerate(seq(response.get("output"))):
            self.items.setdefault(index, dict(obj(item)))


class ResponsesAssembler:
    """Accumulates `response.*` stream events; `feed` returns the event's text delta. The `response.failed`
    and `error` events are the caller's to raise (`failure`)."""

    FAILURES = frozenset({"response.failed", "error"})

    def __init__(self) -> None:
        self.answer = ResponsesAnswer()
        self.done = False

    def feed(self, event: dict[str, Any]) -> str:
        kind = _str(event.get("type"))
        answer = self.answer
        index = event.get("output_index")
        if kind == "response.created":
            answer.model = _str(obj(event.get("response")).get("model")) or answer.model
        elif kind in ("response.output_item.added", "response.output_item.done") and isinstance(index, int):
            answer.items[index] = dict(obj(event.get("item")))  # `done` carries the whole item: it wins
        elif kind == "response.output_text.delta":
            delta = _str(event.get("delta"))
            answer.text.append(delta)
            return delta
        elif kind == "response.function_call_arguments.delta" and isinstance(index, int):
            item = answer.items.setdefault(index, {"type": "function_call"})
            item["arguments"] = _str(item.get("arguments")) + _str(event.get("delta"))
        elif kind == "response.reasoning_summary_text.delta":
            answer.reasoning.append(_str(event.get("delta")))
        elif kind in ("response.completed", "response.incomplete"):
            answer.finish(obj(event.get("response")))
            self.done = True
        return ""


def parse_response(data: dict[str, Any]) -> ResponsesAnswer:
    """A whole (unstreamed) `response` object."""
    answer = ResponsesAnswer()
    answer.finish(data)
    return answer


def _items_text(items: list[dict[str, Any]]) -> str:
    return "".join(
        _str(obj(part).get("text"))
        for item in items
        if item.get("type") == "message"
        for part in seq(item.get("content"))
        if obj(part).get("type") == "output_text"
    )


def _tool_call(item: dict[str, Any]) -> ToolCall:
    arguments, error = parse_arguments(_str(item.get("arguments")))
    call_id = _str(item.get("call_id")) or _str(item.get("id"))
    return ToolCall(id=call_id, name=_str(item.get("name")), arguments=arguments, arguments_error=error)


def _usage(raw: dict[str, Any], price: Price | None) -> Usage:
    prompt, output = _int(raw.get("input_tokens")), _int(raw.get("output_tokens"))
    total = _int(raw.get("total_tokens"))
    if total is None and prompt is not None and output is not None:
        total = prompt + output
    usage = Usage(
        prompt_tokens=prompt,
        completion_tokens=output,
        total_tokens=total,
        cache_read_tokens=_int(obj(raw.get("input_tokens_details")).get("cached_tokens")),
        reasoning_tokens=_int(obj(raw.get("output_tokens_details")).get("reasoning_tokens")),
    )
    return priced(usage, price)


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
