"""Tool calls written as text: recovered only when the answer is nothing but calls to offered tools."""

from __future__ import annotations

import pytest

from agent_server.llm._text_tool_calls import MAX_TEXT_CHARS, recover_tool_calls

OFFERED = {"list_dir", "read_file"}
CALL = '{"name": "list_dir", "arguments": {"path": "./"}}'
READ = '{"name": "read_file", "parameters": {"path": "notes.txt"}}'


def calls(text: str) -> list[tuple[str, dict[str, object]]]:
    return [(c.name, c.arguments) for c in recover_tool_calls(text, OFFERED)]


@pytest.mark.parametrize(
    "text",
    [
        CALL,
        f"  {CALL}\n",
        f"```json\n{CALL}\n```",
        f"```\n{CALL}\n```",
        f"<tool_call>\n{CALL}\n</tool_call>",
        f"<tool_call>{CALL}</tool_call>",
    ],
)
def test_one_call_in_each_shape(text: str) -> None:
    assert calls(text) == [("list_dir", {"path": "./"})]


def test_several_calls_bare_in_an_array_fenced_or_tagged() -> None:
    both = [("list_dir", {"path": "./"}), ("read_file", {"path": "notes.txt"})]
    assert calls(f"{CALL}\n{READ}") == both
    assert calls(f"[{CALL}, {READ}]") == both
    assert calls(f"```json\n{CALL}\n```\n```json\n{READ}\n```") == both
    assert calls(f"<tool_call>{CALL}</tool_call>\n<tool_call>{READ}</tool_call>") == both


def test_ids_are_fresh_and_distinct() -> None:
    first, second = recover_tool_calls(f"{CALL}\n{CALL}", OFFERED)
    assert first.id != second.id and first.id.startswith("call_")


def test_missing_arguments_mean_none() -> None:
    assert calls('{"name": "list_dir"}') == [("list_dir", {})]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "The answer is 42.",
        f"Here is how: {CALL}",  # prose around a bare object
        f"I will call it:\n```json\n{CALL}\n```",  # prose around a fence
        f"<tool_call>{CALL}</tool_call> and then I am done",
        '{"name": "delete_everything", "arguments": {}}',  # not an offered tool
        '{"name": "list_dir", "arguments": "{\\"path\\": \\".\\"}"}',  # arguments not an object
        '{"name": "list_dir", "arguments": {}, "confidence": 0.9}',  # not only a call
        '{"path": "./"}',
        f"{CALL}\n" + '{"name": "nope"}',  # one bad object spoils the lot
        "[1, 2, 3]",
        "```python\nprint('hi')\n```",
    ],
)
def test_anything_else_stays_text(text: str) -> None:
    assert recover_tool_calls(text, OFFERED) == []


def test_a_very_long_answer_is_not_parsed() -> None:
    long = "[" + ", ".join([CALL] * (MAX_TEXT_CHARS // len(CALL) + 1)) + "]"
    assert recover_tool_calls(long, OFFERED) == []
