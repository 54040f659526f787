"""The Anthropic Messages wire format: request bodies out (with prompt-cache breakpoints), answers in.

Pure functions and one accumulator, no I/O, so streamed and whole answers go through the same conversion
(`AnthropicAnswer.to_response`) and come out identical.

Prompt caching (`anthropic.cache`, on by default) puts `cache_control` breakpoints on the last tool, the
last system block, and the last block of each of the last two user messages: the request's end (written
to the cache for the next round) and the end of the previous request (read from the cache: the prefix
before this round's new messages, whatever their number of blocks). That is 4, the API's limit. Every
block is built the same way each time from the same messages, so a request is a byte-stable prefix of
the next.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_server.llm._openai_wire import obj, parse_arguments, seq
from agent_server.llm.base import ModelRequest, ModelResponse
from agent_server.llm.prices import price_for, priced
from agent_server.nesting import MAX_ARGUMENT_DEPTH, NestedTooDeep, deeper_than
from agent_server.settings import AnthropicOptions, Price
from agent_server.types import ImagePart, Message, NativeContent, StopReason, TextPart, ToolCall, ToolSpec, Usage

API = "anthropic"
EPHEMERAL = {"type": "ephemeral"}
THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
CUT_CALL = "the output ended at max_tokens while this call was being written"

STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "content_filter",
    "pause_turn": "pause_turn",
}


# --- request ------------------------------------------------------------------------------


def build_body(request: ModelRequest, *, model: str, options: AnthropicOptions) -> dict[str, Any]:
    """The JSON body of a `POST /v1/messages` for `request` (`stream` per the options)."""
    body: dict[str, Any] = {"model": model, "max_tokens": options.max_tokens}
    system = "\n\n".join(m.text() for m in request.messages if m.role == "system")
    if system:
        body["system"] = [{"type": "text", "text": system}]
    body["messages"] = map_messages([m for m in request.messages if m.role != "system"])
    if request.tools:
        body["tools"] = [map_tool(tool) for tool in request.tools]
        body["tool_choice"] = {"type": "auto"}
    if options.thinking_budget_tokens is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": options.thinking_budget_tokens}
    elif options.temperature is not None:
        body["temperature"] = options.temperature
    if options.cache:
        place_breakpoints(body)
    body.update(options.extra_body)
    body["stream"] = options.stream
    return body


def map_tool(tool: ToolSpec) -> dict[str, Any]:
    wire: dict[str, Any] = {"name": tool.name}
    if tool.description:
        wire["description"] = tool.description
    wire["input_schema"] = tool.input_schema
    return wire


def map_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Our messages as Messages API turns: tool results become `tool_result` blocks of a user turn, and
    consecutive turns of one role are merged (the API alternates user and assistant)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"] = [*out[-1]["content"], *blocks]
        else:
            out.append({"role": role, "content": blocks})
    return out


def _blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id or ""}
        result["content"] = message.text()
        if message.is_error:
            result["is_error"] = True
        return [result]
    if message.role == "assistant" and message.native is not None and message.native.api == API:
        return list(message.native.content)  # thinking blocks must go back exactly as they came
    blocks = _content_blocks(message.content)
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments})
    return blocks


def _content_blocks(content: str | list[TextPart | ImagePart]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        else:
            source = {"type": "base64", "media_type": part.mime_type, "data": part.data}
            blocks.append({"type": "image", "source": source})
    return blocks


def place_breakpoints(body: dict[str, Any]) -> None:
    """`cache_control` on the last tool, the last system block and the last blocks of the last two user turns."""
    for key in ("tools", "system"):
        items: list[dict[str, Any]] = body.get(key) or []
        if items:
            items[-1] = {**items[-1], "cache_control": EPHEMERAL}
    users = [m for m in body["messages"] if m["role"] == "user"]
    for message in users[-2:]:
        content: list[dict[str, Any]] = message["content"]
        content[-1] = {**content[-1], "cache_control": EPHEMERAL}


# --- response -----------------------------------------------------------------------------


@dataclass
class AnthropicAnswer:
    """One answer as read off the wire: its content blocks in order (tool inputs as raw JSON text while
    they stream), stop reason, usage and model."""

    blocks: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    stop_reason: str = ""
    usage: dict[str, Any] = field(default_factory=dict[str, Any])
    model: str | None = None

    def full_text(self) -> str:
        return "".join(b.get("text", "") for b in self.blocks if b.get("type") == "text")

    def has_output(self) -> bool:
        return bool(self.blocks)

    def to_response(self, requested_model: str, prices: Mapping[str, Price]) -> ModelResponse:
        model = self.model or requested_model
        content = [_final_block(block) for block in self.blocks]
        calls = [_tool_call(block) for block in self.blocks if block.get("type") == "tool_use"]
        if self.stop_reason == "max_tokens" and self.blocks and self.blocks[-1].get("type") == "tool_use":
            # The call being written when the limit struck: a whole answer shows its input as whatever parsed.
            calls[-1] = calls[-1].model_copy(update={"arguments_error": CUT_CALL})
        thinking = [b.get("thinking", "") for b in self.blocks if b.get("type") == "thinking"]
        native = None
        if any(block.get("type") in THINKING_BLOCKS for block in content):
            native = NativeContent(api=API, content=content)
        return ModelResponse(
            text=self.full_text(),
            tool_calls=calls,
            reasoning="".join(thinking) or None,
            usage=_usage(self.usage, price_for(model, prices) or price_for(requested_model, prices)),
            model=model,
            stop_reason=STOP_REASONS.get(self.stop_reason),
            native=native,
        )


class AnthropicAssembler:
    """Accumulates stream events (`message_start` ... `message_stop`); `feed` returns the event's text delta.

    An `error` event is returned by `error` for the caller to raise."""

    def __init__(self) -> None:
        self.answer = AnthropicAnswer()
        self.done = False
        self._partial: dict[int, str] = {}  # block index -> tool input JSON so far

    def feed(self, event: dict[str, Any]) -> str:
        kind = event.get("type")
        answer = self.answer
        if kind == "message_start":
            message = obj(event.get("message"))
            answer.model = _str(message.get("model")) or answer.model
            answer.usage.update(obj(message.get("usage")))
        elif kind == "content_block_start":
            self._start(event)
        elif kind == "content_block_delta":
            return self._delta(event)
        elif kind == "message_delta":
            answer.stop_reason = _str(obj(event.get("delta")).get("stop_reason")) or answer.stop_reason
            answer.usage.update(obj(event.get("usage")))  # output_tokens (and, lately, the input counts again)
        elif kind == "message_stop":
            self.done = True
        return ""

    def _start(self, event: dict[str, Any]) -> None:
        block = dict(obj(event.get("content_block")))  # blocks start in index order: 0, 1, ...
        if block.get("type") == "tool_use":
            block["input"] = {}
            self._partial[len(self.answer.blocks)] = ""
        self.answer.blocks.append(block)

    def _delta(self, event: dict[str, Any]) -> str:
        index = event.get("index")
        blocks = self.answer.blocks
        if not isinstance(index, int) or not 0 <= index < len(blocks):
            return ""
        block, delta = blocks[index], obj(event.get("delta"))
        match delta.get("type"):
            case "text_delta":
                text = _str(delta.get("text"))
                block["text"] = block.get("text", "") + text
                return text
            case "input_json_delta":
                self._partial[index] = self._partial.get(index, "") + _str(delta.get("partial_json"))
            case "thinking_delta":
                block["thinking"] = block.get("thinking", "") + _str(delta.get("thinking"))
            case "signature_delta":
                block["signature"] = block.get("signature", "") + _str(delta.get("signature"))
            case _:
                pass
        return ""

    def finish(self) -> AnthropicAnswer:
        """The answer, with each streamed tool input kept as its raw JSON text (parsed by `to_response`)."""
        for index, raw in self._partial.items():
            self.answer.blocks[index]["input"] = raw
        return self.answer


def parse_message(data: dict[str, Any]) -> AnthropicAnswer:
    """A whole (unstreamed) `message` object."""
    return AnthropicAnswer(
        blocks=[dict(obj(block)) for block in seq(data.get("content"))],
        stop_reason=_str(data.get("stop_reason")),
        usage=obj(data.get("usage")),
        model=_str(data.get("model")) or None,
    )


def _final_block(block: dict[str, Any]) -> dict[str, Any]:
    """A block as it goes back to the API: a tool input parsed to an object (`{}` when it does not parse)."""
    if block.get("type") == "tool_use" and isinstance(block.get("input"), str):
        arguments, _ = parse_arguments(block["input"])
        return {**block, "input": arguments}
    return block


def _tool_call(block: dict[str, Any]) -> ToolCall:
    raw = block.get("input")
    if isinstance(raw, str):
        arguments, error = parse_arguments(raw)
    elif deeper_than(raw, MAX_ARGUMENT_DEPTH):  # a whole body may nest deeper than one call's arguments may
        arguments, error = {}, f"arguments are {NestedTooDeep(MAX_ARGUMENT_DEPTH)}"
    else:
        arguments, error = obj(raw), None if isinstance(raw, dict) else "arguments must be a JSON object"
    return ToolCall(id=_str(block.get("id")), name=_str(block.get("name")), arguments=arguments, arguments_error=error)


def _usage(raw: dict[str, Any], price: Price | None) -> Usage:
    """Anthropic counts cache reads and writes apart from `input_tokens`: the record's `prompt_tokens` is their sum."""
    plain, output = _int(raw.get("input_tokens")), _int(raw.get("output_tokens"))
    read, write = _int(raw.get("cache_read_input_tokens")), _int(raw.get("cache_creation_input_tokens"))
    prompt = None if plain is None else plain + (read or 0) + (write or 0)
    total = None if prompt is None or output is None else prompt + output
    usage = Usage(
        prompt_tokens=prompt,
        completion_tokens=output,
        total_tokens=total,
        cache_read_tokens=read,
        cache_write_tokens=write,
    )
    return priced(usage, price)


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
