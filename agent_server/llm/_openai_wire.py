"""The Chat Completions wire format: request bodies out, completions (whole or streamed) in.

Pure functions and one accumulator, no I/O, so streamed and non-streamed answers go through
the same conversion (`Completion.to_response`) and come out identical.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, cast

from agent_server.llm.base import ModelRequest, ModelResponse
from agent_server.llm.prices import price_for, priced
from agent_server.nesting import MAX_ARGUMENT_DEPTH, NestedTooDeep, loads_bounded
from agent_server.settings import OpenAIOptions, Price
from agent_server.types import ImagePart, Message, StopReason, TextPart, ToolCall, ToolSpec, Usage, new_id

ERROR_TEXT_MAX = 1_200
"""The server's error text is cut to this many characters in messages (its middle goes: see `cut_middle`)."""
CHUNK_TEXT_MAX = 300
"""A malformed stream chunk is quoted up to this many characters."""


def obj(value: object) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one."""
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def seq(value: object) -> list[Any]:
    """`value` if it is a JSON array, else an empty one."""
    return cast(list[Any], value) if isinstance(value, list) else []


# --- request ------------------------------------------------------------------------------


def build_body(request: ModelRequest, *, model: str, options: OpenAIOptions) -> dict[str, Any]:
    """The JSON body of a `POST /chat/completions` for `request`.

    The sampling options that are set are sent; `extra_body` is merged last, so it can add any
    server-specific field (or override one of ours, at the user's own risk).
    """
    body: dict[str, Any] = {"model": model, "messages": map_messages(request.messages)}
    if request.tools:
        body["tools"] = [map_tool(tool) for tool in request.tools]
        body["tool_choice"] = "auto"
    if request.output_schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": output_format(request.output_schema)}
    sampling = {"max_tokens": options.max_tokens, "temperature": options.temperature, "seed": options.seed}
    body.update({key: value for key, value in sampling.items() if value is not None})
    body.update(options.extra_body)
    return with_stream(body, options.stream)


def output_format(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's structured-output description of `schema`: not `strict`, since strict mode admits only a subset of
    JSON Schema (every property required, no additional ones) that a caller's schema need not keep to; the loop
    validates the answer either way."""
    return {"name": "output", "schema": schema, "strict": False}


def with_stream(body: dict[str, Any], stream: bool) -> dict[str, Any]:
    """`body` asking for a streamed answer (with usage) or a whole one."""
    out = {key: value for key, value in body.items() if key != "stream_options"}
    out["stream"] = stream
    if stream:
        out["stream_options"] = {"include_usage": True}
    return out


def map_tool(tool: ToolSpec) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name, "parameters": tool.input_schema}
    if tool.description:
        function["description"] = tool.description
    return {"type": "function", "function": function}


def map_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Map messages to the wire; images of a run of tool results follow it as one user message.

    Chat Completions accepts only text in `tool` messages and wants every tool result right after
    the assistant message that asked for it, so tool images go in a user message after the run.
    """
    out: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for message in messages:
        if message.role != "tool" and images:
            out.append(_tool_images_message(images))
            images = []
        if message.role == "tool":
            out.append({"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.text()})
            if isinstance(message.content, list):
                images += [_image(p) for p in message.content if isinstance(p, ImagePart)]
        else:
            out.append(_map_message(message))
    if images:
        out.append(_tool_images_message(images))
    return out


def _map_message(message: Message) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": message.role, "content": _content(message.content)}
    if message.name:
        wire["name"] = message.name
    if message.tool_calls:
        wire["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for c in message.tool_calls
        ]
        # Empty stays "": llama-cpp-python's server answers HTTP 500 to `null`, and every server takes "".
    return wire


def _content(content: str | list[TextPart | ImagePart]) -> str | list[dict[str, Any]]:
    """Plain text stays a string (text-only part lists are joined: not every server takes parts)."""
    if isinstance(content, str):
        return content
    if all(isinstance(part, TextPart) for part in content):
        return "\n".join(part.text for part in content if isinstance(part, TextPart))
    return [{"type": "text", "text": p.text} if isinstance(p, TextPart) else _image(p) for p in content]


def _image(part: ImagePart) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{part.mime_type};base64,{part.data}"}}


def _tool_images_message(images: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": "Images returned by the tool calls above:"}, *images]}


# --- response -----------------------------------------------------------------------------

FINISH_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "content_filter",
}
"""Chat Completions' `finish_reason` in the record's vocabulary; another value (a server's own) maps to None."""


@dataclass
class PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class Completion:
    """One answer as read off the wire, before conversion to a `ModelResponse`."""

    text: list[str] = field(default_factory=list[str])
    reasoning: list[str] = field(default_factory=list[str])
    calls: dict[int, PartialCall] = field(default_factory=dict[int, PartialCall])
    usage: dict[str, Any] = field(default_factory=dict[str, Any])
    model: str | None = None
    finish_reason: str = ""

    def has_output(self) -> bool:
        """Any text, reasoning or tool call arrived."""
        return bool(self.text or self.reasoning or self.calls)

    def full_text(self) -> str:
        return "".join(self.text)

    def to_response(self, requested_model: str, prices: Mapping[str, Price]) -> ModelResponse:
        model = self.model or requested_model
        usage = _usage(self.usage, price_for(model, prices) or price_for(requested_model, prices))
        calls = [_tool_call(self.calls[i]) for i in sorted(self.calls)]
        reasoning = "".join(self.reasoning)
        return ModelResponse(
            text="".join(self.text),
            tool_calls=calls,
            reasoning=reasoning or None,
            usage=usage,
            model=model,
            stop_reason=FINISH_REASONS.get(self.finish_reason),
        )


class StreamAssembler:
    """Accumulates `chat.completion.chunk` objects; `feed` returns the chunk's text delta."""

    def __init__(self) -> None:
        self.completion = Completion()

    def feed(self, chunk: dict[str, Any]) -> str:
        done = self.completion
        done.model = done.model or _str(chunk.get("model")) or None
        if chunk.get("usage"):
            done.usage = obj(chunk["usage"])
        choice = obj(next(iter(seq(chunk.get("choices"))), None))
        done.finish_reason = _str(choice.get("finish_reason")) or done.finish_reason
        delta = obj(choice.get("delta"))
        for call in seq(delta.get("tool_calls")):
            self._feed_call(obj(call))
        reasoning = _str(delta.get("reasoning_content")) or _str(delta.get("reasoning"))
        if reasoning:
            done.reasoning.append(reasoning)
        text = _str(delta.get("content"))
        if text:
            done.text.append(text)
        return text

    def _feed_call(self, call: dict[str, Any]) -> None:
        calls = self.completion.calls
        index = call.get("index")
        if not isinstance(index, int):  # a server that omits `index`: a new id starts a new call
            known = any(p.id == call.get("id") for p in calls.values())
            index = len(calls) if not calls or (call.get("id") and not known) else max(calls)
        partial = calls.setdefault(index, PartialCall())
        function = obj(call.get("function"))
        partial.id = partial.id or _str(call.get("id"))
        partial.name = partial.name or _str(function.get("name"))
        partial.arguments += _arguments_text(function.get("arguments"))


def parse_completion(data: dict[str, Any]) -> Completion:
    """A non-streamed `chat.completion` object."""
    choice = obj(next(iter(seq(data.get("choices"))), None))
    message = obj(choice.get("message"))
    done = Completion(model=_str(data.get("model")) or None, usage=obj(data.get("usage")))
    done.finish_reason = _str(choice.get("finish_reason"))
    parts = seq(message.get("content"))  # a few servers answer with content parts
    text = "".join(_str(obj(part).get("text")) for part in parts) if parts else _str(message.get("content"))
    if text:
        done.text.append(text)
    reasoning = _str(message.get("reasoning_content")) or _str(message.get("reasoning"))
    if reasoning:
        done.reasoning.append(reasoning)
    for index, raw in enumerate(seq(message.get("tool_calls"))):
        call, function = obj(raw), obj(obj(raw).get("function"))
        arguments = _arguments_text(function.get("arguments"))
        done.calls[index] = PartialCall(_str(call.get("id")), _str(function.get("name")), arguments)
    return done


def parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """The arguments object, or `({}, why)` when `raw` is not a JSON object. Empty means `{}`."""
    if not raw.strip():
        return {}, None
    try:
        parsed: object = loads_bounded(raw, MAX_ARGUMENT_DEPTH)
    except NestedTooDeep as exc:
        return {}, f"arguments are {exc}"
    except ValueError as exc:
        return {}, f"arguments are not valid JSON ({exc}): {raw[:200]!r}"
    if not isinstance(parsed, dict):
        return {}, f"arguments must be a JSON object, not {type(parsed).__name__}: {raw[:200]!r}"
    return cast(dict[str, Any], parsed), None


def _tool_call(partial: PartialCall) -> ToolCall:
    arguments, error = parse_arguments(partial.arguments)
    return ToolCall(id=partial.id or new_id("call"), name=partial.name, arguments=arguments, arguments_error=error)


def _usage(raw: dict[str, Any], price: Price | None) -> Usage:
    """The reported usage, priced; a count the server did not report stays None (unknown), never 0.
    `prompt_tokens_details.cached_tokens` is the part of the prompt read from the cache (OpenAI writes
    its cache for free), `completion_tokens_details.reasoning_tokens` the part of the completion spent
    reasoning."""
    prompt, completion = _int(raw.get("prompt_tokens")), _int(raw.get("completion_tokens"))
    total = _int(raw.get("total_tokens"))
    if total is None and prompt is not None and completion is not None:
        total = prompt + completion
    usage = Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total,
        cache_read_tokens=_int(obj(raw.get("prompt_tokens_details")).get("cached_tokens")),
        reasoning_tokens=_int(obj(raw.get("completion_tokens_details")).get("reasoning_tokens")),
    )
    return priced(usage, price)


def _arguments_text(value: object) -> str:
    """Argument fragments are strings; a few servers send a whole object instead."""
    if isinstance(value, str):
        return value
    return json.dumps(value) if isinstance(value, dict) else ""


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# --- errors -------------------------------------------------------------------------------


Redact = Callable[[str], str]


def error_text(body: bytes, redact: Redact) -> str:
    """The server's own error text: `error.message` (or a similar field) of a JSON body, else the body.

    Secrets are masked (`redact`) on the whole text before it is cut, so no part of one survives a cut.
    """
    text = body.decode("utf-8", errors="replace").strip()
    try:
        data: object = loads_bounded(text)
    except ValueError:
        data = None
    found = _error_message(data)
    return cut_middle(redact(found or text or "(empty body)"), ERROR_TEXT_MAX)


def cut_middle(text: str, limit: int) -> str:
    """`text` within about `limit` characters, its middle cut out: a validation error's decisive
    line is often the last one, and its first lines say what failed."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    return f"{text[:head]} [... {len(text) - limit} characters cut ...] {text[-tail:]}"


_VALIDATION_SHAPES = re.compile(
    r"validation error|Input should be|Field required|field required|value is not a valid|"
    r"""['"](?:loc|type_error|value_error)['"]\s*:|Invalid schema|is not valid under|invalid_request_error""",
)


def is_validation_error(text: str) -> bool:
    """True when a 5xx body reads as request validation (pydantic and JSON Schema phrasings): sending
    the same request again cannot pass, so it is not retried."""
    return _VALIDATION_SHAPES.search(text) is not None


def _error_message(data: object) -> str:
    payload = obj(data)
    error = payload.get("error")
    for candidate in (obj(error).get("message"), error, payload.get("message"), payload.get("detail")):
        if isinstance(candidate, str) and candidate.strip():
            return candidate.strip()
    detail = payload.get("detail")
    return json.dumps(detail) if isinstance(detail, list) and detail else ""


def retry_after_s(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `Retry-After` as seconds or an HTTP date; None if absent."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))
