"""The three model APIs as a fake server speaks them: one scripted answer, encoded per API, streamed or whole.

The provider contract suite (`tests/unit/llm/test_contract.py`) writes each case once, in these terms, and runs
it against every provider: `Dialect.answer(...)` is the `Reply` of the API for an answer with text, tool calls,
usage and a stop reason; `Dialect.sent_tool_results(body)` reads back what the provider sent for the tool
results of a request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agent_server.llm.anthropic import AnthropicLLM
from agent_server.llm.openai import OpenAIChatLLM
from agent_server.llm.openai_responses import OpenAIResponsesLLM
from agent_server.settings import AnthropicOptions, OpenAIOptions
from tests.fakes.openai_server import FakeOpenAIServer, Reply, call_delta, chunk, completion

Provider = OpenAIChatLLM | AnthropicLLM | OpenAIResponsesLLM


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    arguments: str
    """The JSON text as the model writes it (cut short for a call cut at the token limit)."""


@dataclass(frozen=True)
class Answer:
    """One model answer, in no API's words."""

    text: list[str] = field(default_factory=list[str])
    """Streamed in these pieces."""
    calls: list[Call] = field(default_factory=list[Call])
    stop: str = "end"
    """`end`, `tools` or `length` (cut at the token limit)."""
    input_tokens: int = 10
    output_tokens: int = 5
    cache_read: int = 0
    cache_write: int = 0
    reasoning_tokens: int = 0


class Dialect:
    name: str
    key_header: str

    def provider(self, server: FakeOpenAIServer, *, key: str | None, **options: Any) -> Provider:
        raise NotImplementedError

    def answer(self, answer: Answer, *, stream: bool) -> Reply:
        raise NotImplementedError

    def error(
        self, status: int, message: str, *, kind: str = "api_error", headers: dict[str, str] | None = None
    ) -> Reply:
        return Reply(status=status, headers=headers or {}, json={"error": {"message": message, "type": kind}})

    def error_event(self, message: str) -> Any:
        """An error event mid-stream."""
        raise NotImplementedError

    def sent_tool_results(self, body: dict[str, Any]) -> list[tuple[str, str]]:
        """(call id, text) of each tool result the request carries, in order."""
        raise NotImplementedError

    def sent_key(self, headers: dict[str, str]) -> str:
        return headers.get(self.key_header, "")


FAST: dict[str, Any] = {"backoff_base_s": 0.0, "backoff_max_s": 0.0}


class Chat(Dialect):
    name = "openai"
    key_header = "authorization"

    def provider(self, server: FakeOpenAIServer, *, key: str | None, **options: Any) -> Provider:
        opts = OpenAIOptions(base_url=server.base_url, **{**FAST, **options})
        return OpenAIChatLLM(opts, api_key=key, model="gpt-4.1-mini")

    def answer(self, answer: Answer, *, stream: bool) -> Reply:
        finish = {"end": "stop", "tools": "tool_calls", "length": "length"}[answer.stop]
        usage = {
            "prompt_tokens": answer.input_tokens,
            "completion_tokens": answer.output_tokens,
            "total_tokens": answer.input_tokens + answer.output_tokens,
            "prompt_tokens_details": {"cached_tokens": answer.cache_read},
            "completion_tokens_details": {"reasoning_tokens": answer.reasoning_tokens},
        }
        if not stream:
            calls = [(c.id, c.name, c.arguments) for c in answer.calls]
            body = completion(
                "".join(answer.text) or None, tool_calls=calls, finish_reason=finish, model="gpt-4.1-mini"
            )
            return Reply(json={**body, "usage": usage})
        events: list[Any] = [chunk(content=piece, model="gpt-4.1-mini") for piece in answer.text]
        for index, call in enumerate(answer.calls):
            half = len(call.arguments) // 2
            events.append(
                chunk(tool_calls=[call_delta(index, id=call.id, name=call.name, arguments=call.arguments[:half])])
            )
            events.append(chunk(tool_calls=[call_delta(index, arguments=call.arguments[half:])]))
        events.append(chunk(finish_reason=finish))
        events.append(
            {"id": "c", "object": "chat.completion.chunk", "model": "gpt-4.1-mini", "choices": [], "usage": usage}
        )
        return Reply(sse=events)

    def error_event(self, message: str) -> Any:
        return {"error": {"message": message}}

    def sent_tool_results(self, body: dict[str, Any]) -> list[tuple[str, str]]:
        return [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"]

    def sent_key(self, headers: dict[str, str]) -> str:
        return headers.get("authorization", "").removeprefix("Bearer ")


class Messages(Dialect):
    name = "anthropic"
    key_header = "x-api-key"

    def provider(self, server: FakeOpenAIServer, *, key: str | None, **options: Any) -> Provider:
        opts = AnthropicOptions(base_url=server.root_url, **{**FAST, **options})
        return AnthropicLLM(opts, api_key=key, model="claude-sonnet-4-5")

    def answer(self, answer: Answer, *, stream: bool) -> Reply:
        stop = {"end": "end_turn", "tools": "tool_use", "length": "max_tokens"}[answer.stop]
        usage = {
            "input_tokens": answer.input_tokens - answer.cache_read - answer.cache_write,
            "cache_read_input_tokens": answer.cache_read,
            "cache_creation_input_tokens": answer.cache_write,
            "output_tokens": answer.output_tokens,
        }
        if not stream:
            content: list[dict[str, Any]] = [{"type": "text", "text": "".join(answer.text)}] if answer.text else []
            for call in answer.calls:
                content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": _object(call.arguments)})
            message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5"}
            return Reply(json={**message, "content": content, "stop_reason": stop, "usage": usage})
        return Reply(sse=messages_events(answer, stop, usage), done=False)

    def error(
        self, status: int, message: str, *, kind: str = "api_error", headers: dict[str, str] | None = None
    ) -> Reply:
        body = {"type": "error", "error": {"type": kind, "message": message}}
        return Reply(status=status, headers=headers or {}, json=body)

    def error_event(self, message: str) -> Any:
        return {"type": "error", "error": {"type": "overloaded_error", "message": message}}

    def sent_tool_results(self, body: dict[str, Any]) -> list[tuple[str, str]]:
        return [
            (block["tool_use_id"], block["content"])
            for message in body["messages"]
            if message["role"] == "user"
            for block in message["content"]
            if block.get("type") == "tool_result"
        ]


def messages_events(answer: Answer, stop: str, usage: dict[str, Any]) -> list[Any]:
    """An Anthropic event stream, `message_start` to `message_stop`."""
    start_usage = {**usage, "output_tokens": 1}
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": []}
    events: list[Any] = [{"type": "message_start", "message": {**message, "usage": start_usage}}]
    index = 0
    if answer.text:
        events.append({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        events.append({"type": "ping"})
        for piece in answer.text:
            events.append({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}})
        events.append({"type": "content_block_stop", "index": 0})
        index = 1
    for call in answer.calls:
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        half = len(call.arguments) // 2
        for part in (call.arguments[:half], call.arguments[half:]):
            delta = {"type": "input_json_delta", "partial_json": part}
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    events.append(
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": usage["output_tokens"]}}
    )
    events.append({"type": "message_stop"})
    return events


class Responses(Dialect):
    name = "openai-responses"
    key_header = "authorization"

    def provider(self, server: FakeOpenAIServer, *, key: str | None, **options: Any) -> Provider:
        opts = OpenAIOptions(base_url=server.base_url, **{**FAST, **options})
        return OpenAIResponsesLLM(opts, api_key=key, model="gpt-5-mini")

    def answer(self, answer: Answer, *, stream: bool) -> Reply:
        items: list[dict[str, Any]] = []
        if answer.text:
            part = {"type": "output_text", "text": "".join(answer.text), "annotations": []}
            items.append(
                {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant", "content": [part]}
            )
        for call in answer.calls:
            items.append(
                {
                    "type": "function_call",
                    "id": f"fc_{call.id}",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                    "status": "completed",
                }
            )
        usage = {
            "input_tokens": answer.input_tokens,
            "input_tokens_details": {"cached_tokens": answer.cache_read},
            "output_tokens": answer.output_tokens,
            "output_tokens_details": {"reasoning_tokens": answer.reasoning_tokens},
            "total_tokens": answer.input_tokens + answer.output_tokens,
        }
        cut = answer.stop == "length"
        response = {
            "id": "resp_1",
            "object": "response",
            "model": "gpt-5-mini",
            "status": "incomplete" if cut else "completed",
            "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
            "output": items,
            "usage": usage,
            "error": None,
        }
        if not stream:
            return Reply(json=response)
        return Reply(sse=responses_events(answer, items, response), done=False)

    def error_event(self, message: str) -> Any:
        return {"type": "error", "code": "server_error", "message": message}

    def sent_tool_results(self, body: dict[str, Any]) -> list[tuple[str, str]]:
        return [(i["call_id"], i["output"]) for i in body["input"] if i.get("type") == "function_call_output"]

    def sent_key(self, headers: dict[str, str]) -> str:
        return headers.get("authorization", "").removeprefix("Bearer ")


def responses_events(answer: Answer, items: list[dict[str, Any]], response: dict[str, Any]) -> list[Any]:
    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[Any] = [{"type": "response.created", "response": pending}]
    for index, item in enumerate(items):
        if item["type"] == "message":
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": {**item, "content": []}}
            )
            for piece in answer.text:
                events.append(
                    {"type": "response.output_text.delta", "output_index": index, "content_index": 0, "delta": piece}
                )
        else:
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": {**item, "arguments": ""}}
            )
            half = len(item["arguments"]) // 2
            for part in (item["arguments"][:half], item["arguments"][half:]):
                events.append({"type": "response.function_call_arguments.delta", "output_index": index, "delta": part})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    kind = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
    events.append({"type": kind, "response": response})
    return events


def _object(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return {}


DIALECTS: list[Dialect] = [Chat(), Messages(), Responses()]
