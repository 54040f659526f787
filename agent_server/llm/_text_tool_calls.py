"""Tool calls that a model wrote as text, recovered (`openai.parse_text_tool_calls = "auto"`).

Small local models, and servers whose chat template does not parse tool calls, often answer with
`{"name": "list_dir", "arguments": {"path": "."}}` as plain text. The answer is taken as tool calls
only when it consists of nothing else: one or several such objects, bare (a JSON object, several
objects one after another, or an array of them), each in a ```json fence, or each in
`<tool_call>...</tool_call>` tags, with only whitespace around them. Every object must name an
offered tool and carry object arguments (`arguments`, or `parameters` as some templates write it;
absent means none). Anything else, such as prose that quotes JSON, stays the answer. The arguments
are then validated by the tool like any other call's.
"""

from __future__ import annotations

import json
import re
from typing import Any, cast

from agent_server.nesting import MAX_DOCUMENT_DEPTH, exceeds_depth
from agent_server.types import ToolCall, new_id

_TAGGED = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_FENCED = re.compile(r"```(?:json)?[ \t]*\n(.*?)```", re.DOTALL)
MAX_TEXT_CHARS = 100_000
"""A longer answer is not parsed: tool calls are short."""


def recover_tool_calls(text: str, offered: set[str]) -> list[ToolCall]:
    """The tool calls `text` consists of, or [] when it is not only tool calls (see the module docstring)."""
    stripped = text.strip()
    if not stripped or len(stripped) > MAX_TEXT_CHARS:
        return []
    for pattern in (_TAGGED, _FENCED):
        if pattern.search(stripped):
            if pattern.sub("", stripped).strip():
                return []  # prose around the blocks: an answer that mentions calls
            objects = [value for block in pattern.findall(stripped) for value in _json_values(block)]
            return _calls(objects, offered)
    return _calls(_json_values(stripped), offered)


def _json_values(text: str) -> list[Any]:
    """The JSON values `text` is made of, one after another; [] if anything else is in it."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    index, text = 0, text.strip()
    if exceeds_depth(text, MAX_DOCUMENT_DEPTH):  # no parse (it would recurse past its limit): an answer
        return values
    while index < len(text):
        try:
            value, index = decoder.raw_decode(text, index)
        except ValueError:
            return []
        values.extend(cast(list[Any], value) if isinstance(value, list) else [value])
        while index < len(text) and text[index] in " \t\r\n,;":
            index += 1
    return values


def _calls(objects: list[Any], offered: set[str]) -> list[ToolCall]:
    calls: list[ToolCall] = []
    for value in objects:
        call = _call(value, offered)
        if call is None:
            return []
        calls.append(call)
    return calls


def _call(value: object, offered: set[str]) -> ToolCall | None:
    if not isinstance(value, dict):
        return None
    fields = cast(dict[str, Any], value)
    name = fields.get("name")
    arguments = fields.get("arguments", fields.get("parameters", {}))
    if not isinstance(name, str) or name not in offered or not isinstance(arguments, dict):
        return None
    if set(fields) - {"name", "arguments", "parameters", "id", "type"}:
        return None
    return ToolCall(id=new_id("call"), name=name, arguments=cast(dict[str, Any], arguments))
