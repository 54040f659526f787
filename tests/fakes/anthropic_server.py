"""A fake Anthropic Messages model that accounts for prompt caching the way the API documents it.

`AnthropicModel` is the `responder` of a `FakeOpenAIServer` (a real HTTP server on 127.0.0.1): each request is
answered with the next scripted `Say`, streamed or whole as the request asks, with usage computed from the
request itself:

- the prompt is the request's blocks in the API's order (each tool, each system block, each message's content
  blocks), each worth `len(its JSON) // 4 + 1` tokens;
- a block with `cache_control` is a breakpoint; at each one the cache is looked up at that block and up to 20
  blocks before it (the API's lookback), and the longest prefix found is read (`cache_read_input_tokens`);
- the prefix up to every breakpoint at least `min_cacheable_tokens` long is written to the cache; what lay
  between the read prefix and the last breakpoint is billed as written (`cache_creation_input_tokens`), the
  rest as plain input (`input_tokens`).

It refuses, with the API's HTTP 400, what the API refuses: more than 4 breakpoints, a breakpoint on a thinking
block, turns that do not alternate, a `tool_result` with no `tool_use` before it, and, with thinking on, a tool
loop whose assistant turn does not send back the thinking block it was given exactly as it was given.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.openai_server import Received, Reply

LOOKBACK_BLOCKS = 20
MAX_BREAKPOINTS = 4


@dataclass
class Say:
    """One scripted answer."""

    text: str = ""
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list[tuple[str, str, dict[str, Any]]])
    """`(id, name, input)` of each tool call."""
    thinking: str | None = None
    """With thinking on: the thinking block that opens the answer (its signature is derived from it)."""
    output_tokens: int = 20


@dataclass
class Accounted:
    """One request's prompt, as the cache saw it."""

    input_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int

    @property
    def total(self) -> int:
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens

    @property
    def read_share(self) -> float:
        return self.cache_read_input_tokens / self.total if self.total else 0.0


class AnthropicModel:
    """Scripted answers with prompt-cache accounting (see the module docstring).

    `accounted` holds each answered request's usage; `sent_thinking` the thinking blocks handed out, by the id
    of the tool call they came with.
    """

    def __init__(self, *answers: Say, min_cacheable_tokens: int = 1024) -> None:
        self.answers: deque[Say] = deque(answers)
        self.min_cacheable_tokens = min_cacheable_tokens
        self.cache: set[str] = set()
        self.accounted: list[Accounted] = []
        self.sent_thinking: dict[str, dict[str, Any]] = {}

    def add(self, *answers: Say) -> None:
        self.answers.extend(answers)

    def __call__(self, request: Received) -> Reply:
        body = request.json
        problem = self._check(body)
        if problem is not None:
            return Reply(
                status=400, json={"type": "error", "error": {"type": "invalid_request_error", "message": problem}}
            )
        if not self.answers:
            return Reply(
                status=500, json={"type": "error", "error": {"type": "api_error", "message": "no answer left"}}
            )
        say = self.answers.popleft()
        usage = self._account(body)
        self.accounted.append(usage)
        content = self._content(say, thinking="thinking" in body)
        stop = "tool_use" if say.calls else "end_turn"
        usage_json = {**usage.__dict__, "output_tokens": say.output_tokens}
        if body.get("stream"):
            return Reply(sse=_events(content, stop, usage_json, body["model"]), done=False)
        message = {"id": "msg_fake", "type": "message", "role": "assistant", "model": body["model"]}
        return Reply(json={**message, "content": content, "stop_reason": stop, "usage": usage_json})

    def _content(self, say: Say, *, thinking: bool) -> list[dict[str, Any]]:
        content: list[dict[str, Any]] = []
        if thinking and say.thinking is not None:
            signature = hashlib.sha256(say.thinking.encode()).hexdigest()
            content.append({"type": "thinking", "thinking": say.thinking, "signature": signature})
        if say.text:
            content.append({"type": "text", "text": say.text})
        for call_id, name, arguments in say.calls:
            content.append({"type": "tool_use", "id": call_id, "name": name, "input": arguments})
            if content[0]["type"] == "thinking":
                self.sent_thinking[call_id] = content[0]
        return content

    # --- prompt caching -------------------------------------------------------------------

    def _account(self, body: dict[str, Any]) -> Accounted:
        blocks = _prompt_blocks(body)
        tokens = [len(text) // 4 + 1 for text, _ in blocks]
        hashes: list[str] = []
        running = hashlib.sha256()
        for text, _ in blocks:
            running.update(text.encode())
            hashes.append(running.copy().hexdigest())
        breakpoints = [i for i, (_, marked) in enumerate(blocks) if marked]
        read_end = 0
        for point in breakpoints:
            for position in range(point, max(-1, point - LOOKBACK_BLOCKS - 1), -1):
                if hashes[position] in self.cache:
                    read_end = max(read_end, position + 1)
                    break
        read = sum(tokens[:read_end])
        written = 0
        for point in breakpoints:
            if sum(tokens[: point + 1]) >= self.min_cacheable_tokens:
                self.cache.add(hashes[point])
                written = max(written, sum(tokens[: point + 1]) - read)
        return Accounted(
            input_tokens=sum(tokens) - read - written, cache_read_input_tokens=read, cache_creation_input_tokens=written
        )

    # --- what the API refuses ---------------------------------------------------------------

    def _check(self, body: dict[str, Any]) -> str | None:
        marked = [block for block in _all_blocks(body) if "cache_control" in block]
        if len(marked) > MAX_BREAKPOINTS:
            return f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(marked)}."
        if any(block.get("type") in ("thinking", "redacted_thinking") for block in marked):
            return "messages: thinking blocks cannot be marked with cache_control"
        messages = body["messages"]
        roles = [m["role"] for m in messages]
        if not roles or roles[0] != "user" or any(a == b for a, b in zip(roles, roles[1:], strict=False)):
            return f"messages: roles must alternate, starting with user: {roles}"
        for index, message in enumerate(messages):
            results = [b["tool_use_id"] for b in message["content"] if b.get("type") == "tool_result"]
            if not results:
                continue
            previous = messages[index - 1]["content"] if index else []
            uses = {b["id"] for b in previous if b.get("type") == "tool_use"}
            if not set(results) <= uses:
                return f"messages.{index}: tool_result blocks without their tool_use in the previous message"
        if "thinking" in body:
            return self._check_thinking(messages)
        return None

    def _check_thinking(self, messages: list[dict[str, Any]]) -> str | None:
        """In a tool loop (the request ends with tool results), the assistant turn must open with its thinking."""
        last = messages[-1]["content"]
        if not any(b.get("type") == "tool_result" for b in last):
            return None
        assistant = messages[-2]["content"]
        uses = [b["id"] for b in assistant if b.get("type") == "tool_use"]
        expected = next((self.sent_thinking[u] for u in uses if u in self.sent_thinking), None)
        if expected is None:
            return None
        if assistant[0] != expected:
            found = assistant[0].get("type")
            return f"messages.{len(messages) - 2}.content.0: expected the thinking block as it was sent, found {found}"
        return None


def _all_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = [*(body.get("tools") or []), *(body.get("system") or [])]
    for message in body["messages"]:
        content = message["content"]
        blocks += content if isinstance(content, list) else []
    return blocks


def _prompt_blocks(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """Each block of the prompt in the API's order, as (its canonical text without the marker, marked)."""
    out: list[tuple[str, bool]] = []

    def add(scope: str, block: dict[str, Any]) -> None:
        plain = {k: v for k, v in block.items() if k != "cache_control"}
        out.append((json.dumps([scope, plain], sort_keys=True), "cache_control" in block))

    for tool in body.get("tools") or []:
        add("tool", tool)
    for block in body.get("system") or []:
        add("system", block)
    for message in body["messages"]:
        content = message["content"]
        for block in content if isinstance(content, list) else [{"type": "text", "text": content}]:
            add(message["role"], block)
    return out


def _events(content: list[dict[str, Any]], stop: str, usage: dict[str, Any], model: str) -> list[Any]:
    start = {"id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": []}
    events: list[Any] = [{"type": "message_start", "message": {**start, "usage": {**usage, "output_tokens": 1}}}]
    for index, block in enumerate(content):
        kind = block["type"]
        if kind == "thinking":
            events.append(
                {"type": "content_block_start", "index": index, "content_block": {"type": "thinking", "thinking": ""}}
            )
            events.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "thinking_delta", "thinking": block["thinking"]},
                }
            )
            events.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "signature_delta", "signature": block["signature"]},
                }
            )
        elif kind == "text":
            events.append(
                {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
            )
            events.append(
                {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": block["text"]}}
            )
        else:
            events.append({"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}})
            partial = json.dumps(block["input"])
            events.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": partial},
                }
            )
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": usage["output_tokens"]}}
    )
    events.append({"type": "message_stop"})
    return events
