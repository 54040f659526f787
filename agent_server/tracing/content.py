"""What a span may say of a turn's content, when settings `tracing.content` opts in (README "Traces").

Prompts, answers, tool arguments and results may hold secrets and personal data, so they are recorded only on
request, and then: every text is redacted (`agent_server.redaction`: the mounted servers' secrets, secret-looking
environment values, URL credentials) before it is cut, and each attribute keeps at most `max_chars` characters
of text, saying how much was cut. Messages follow the GenAI conventions' JSON form (`role`, `parts`), newest
kept first when they do not all fit. Only a bounded slice of each text is ever redacted (the budget plus the
longest secret), so a long history costs no more than a short one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agent_server.redaction import redact
from agent_server.types import Message, TextPart, ToolCall, ToolResult

_SECRET_NAMES = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")
_MIN_ENV_SECRET_CHARS = 8
_MAX_MESSAGES = 64
"""Messages kept in one attribute at most (the newest), however short they are."""


def environment_secrets(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The values of variables whose names say they are secrets (`OPENAI_API_KEY`, `..._TOKEN`, ...)."""
    return tuple(
        value
        for name, value in environ.items()
        if any(word in name.upper() for word in _SECRET_NAMES) and len(value) >= _MIN_ENV_SECRET_CHARS
    )


class Content:
    """Redacts and cuts the content recorded on spans."""

    def __init__(self, secrets: Iterable[str], max_chars: int) -> None:
        self._secrets = tuple(secrets)
        self._margin = max((len(s) for s in self._secrets), default=0)
        self.max_chars = max_chars

    def text(self, value: str, budget: int | None = None) -> str:
        """`value` redacted, then cut to `budget` (default `max_chars`) with a note saying how much was cut."""
        limit = self.max_chars if budget is None else budget
        # Redact a slice that still holds any secret crossing the cut, then cut what redaction left.
        shown = redact(value[: limit + self._margin], self._secrets)
        if len(shown) <= limit and len(value) <= limit + self._margin:
            return shown
        return f"{shown[:limit]}...[{max(len(value) - limit, 1)} chars cut]"

    def json(self, value: Any) -> str:
        return self.text(json.dumps(value, ensure_ascii=False, default=str))

    def arguments(self, call: ToolCall) -> str:
        return self.json(call.arguments)

    def result(self, result: ToolResult) -> str:
        text = result.text()
        if not text and result.structured is not None:
            return self.json(result.structured)
        return self.text(text)

    def prompt(self, text: str) -> str:
        return self._dump([{"role": "user", "parts": [{"type": "text", "content": self.text(text)}]}])

    def answer(self, text: str, finish_reason: str | None = None, calls: Sequence[ToolCall] = ()) -> str:
        parts: list[dict[str, Any]] = [{"type": "text", "content": self.text(text)}] if text else []
        parts += [self._call_part(call) for call in calls]
        message: dict[str, Any] = {"role": "assistant", "parts": parts}
        if finish_reason is not None:
            message["finish_reason"] = finish_reason
        return self._dump([message])

    def messages(self, messages: Sequence[Message]) -> str:
        """The newest messages that fit `max_chars` of text, in the order they were sent."""
        budget = self.max_chars
        kept: list[dict[str, Any]] = []
        for message in reversed(messages[-_MAX_MESSAGES:]):
            if budget <= 0:
                break
            parts, budget = self._parts(message, budget)
            kept.append({"role": message.role, "parts": parts})
        return self._dump(list(reversed(kept)))

    def _parts(self, message: Message, budget: int) -> tuple[list[dict[str, Any]], int]:
        parts: list[dict[str, Any]] = []
        texts = (
            [message.content]
            if isinstance(message.content, str)
            else [p.text for p in message.content if isinstance(p, TextPart)]
        )
        for text in texts:
            shown = self.text(text, budget)
            budget -= len(shown)
            if message.role == "tool":
                parts.append({"type": "tool_call_response", "id": message.tool_call_id, "result": shown})
            else:
                parts.append({"type": "text", "content": shown})
        for call in message.tool_calls:
            part = self._call_part(call, budget)
            budget -= len(part["arguments"])
            parts.append(part)
        return parts, budget

    def _call_part(self, call: ToolCall, budget: int | None = None) -> dict[str, Any]:
        arguments = self.text(json.dumps(call.arguments, ensure_ascii=False, default=str), budget)
        return {"type": "tool_call", "id": call.id, "name": call.name, "arguments": arguments}

    @staticmethod
    def _dump(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)
