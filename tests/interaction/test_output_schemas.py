"""Every result of every tool, error results included, validates against the tool's declared outputSchema.

Strict clients (the TypeScript SDK, Gemini CLI) validate `structuredContent` of error results too, and show a
schema error instead of the server's message when it does not match; the Python SDK checks successes only,
so these tests check both with a JSON Schema validator.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from jsonschema import validators

from tests.interaction.harness import MODES, Harness, connect, make_settings
from tests.interaction.test_errors import BAD_CALLS

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("mode", MODES)]

SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
    {"content": "It says hello."},
    {"tool_calls": [{"name": "list_dir", "arguments": {}}]},  # halted (max_tool_passes 0)
    {"error": {"message": "model down"}},  # failed
    {"delay_s": 5, "content": "too late"},  # timed out
    {"content": "answer"},
    {"content": "an answer cut", "stop_reason": "max_tokens"},  # truncated
    {"content": "SUMMARY"},  # compact
    {"content": "background answer"},
    {"delay_s": 30, "content": "cancelled in the background"},
]


class Checker:
    """Validates results against the outputSchemas the server lists, and remembers what it saw."""

    def __init__(self, tools: list[types.Tool]) -> None:
        self.validators = {t.name: validators.validator_for(t.output_schema)(t.output_schema) for t in tools}
        self.seen: dict[str, set[bool]] = {name: set() for name in self.validators}

    async def call(self, h: Harness, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        result = await h.call(tool, arguments)
        assert result.structured_content is not None, (tool, arguments)
        problems = [e.message for e in self.validators[tool].iter_errors(result.structured_content)]
        assert not problems, (tool, arguments, result.structured_content, problems)
        self.seen[tool].add(result.is_error)
        return result


async def test_every_result_of_every_tool_matches_its_output_schema(tmp_path: Path, mode: str) -> None:
    async with connect(tmp_path, SCRIPT, mode=mode) as h:
        (h.workspace / "notes.txt").write_text("hello\n")
        check = Checker((await h.client.list_tools()).tools)
        with anyio.fail_after(20):
            for tool, arguments, _, _ in BAD_CALLS:
                assert (await check.call(h, tool, arguments)).is_error
            turn = (await check.call(h, "run_turn", {"prompt": "read notes"})).structured_content
            assert turn["status"] == "completed"
            await check.call(h, "run_turn", {"prompt": "loop", "max_tool_passes": 0, "detail": "full"})
            assert (await check.call(h, "run_turn", {"prompt": "fail"})).is_error
            await check.call(h, "run_turn", {"prompt": "slow", "timeout_s": 0.2})
            await check.call(h, "run_turn", {"prompt": "new", "session_id": "new", "detail": "full"})
            cut = await check.call(h, "run_turn", {"prompt": "cut", "detail": "full"})
            assert cut.structured_content is not None and cut.structured_content["status"] == "truncated"
            await check.call(h, "compact", {"keep_last": 1})
            await check.call(h, "compact", {"dry_run": True})
            created = (await check.call(h, "session_create", {"title": "t"})).structured_content
            await check.call(h, "session_list", {"limit": 1})
            await check.call(h, "session_get", {"session_id": turn["session_id"], "include_history": True})
            await check.call(h, "session_get", {"session_id": turn["session_id"], "detail": "full"})
            await check.call(h, "session_switch", {"session_id": turn["session_id"]})
            await check.call(h, "session_fork", {"at_turn": turn["turn_id"]})
            assert (await check.call(h, "session_fork", {"at_turn": "turn_nope"})).is_error
            await check.call(h, "session_delete", {"session_id": created["session_id"]})
            await check.call(h, "agent_tools", {})
            await _background_turns(h, check)
    assert check.seen == {tool: {False, True} for tool in check.seen}, "a success and an error of every tool"


async def _background_turns(h: Harness, check: Checker) -> None:
    started = (await check.call(h, "run_turn", {"prompt": "bg", "background": True})).structured_content
    await check.call(h, "turn_wait", {"turn_id": started["turn_id"], "timeout_s": 10, "detail": "full"})
    await check.call(h, "turn_get", {"turn_id": started["turn_id"]})
    slow = await check.call(h, "run_turn", {"prompt": "slow", "background": True, "session_id": "new"})
    await check.call(h, "turn_cancel", {"turn_id": slow.structured_content["turn_id"]})
    for tool in ("turn_get", "turn_wait", "turn_cancel"):
        assert (await check.call(h, tool, {"turn_id": "turn_nope"})).is_error


VALID_ARGUMENTS: dict[str, dict[str, Any]] = {
    "run_turn": {"prompt": "x"},
    "turn_get": {"turn_id": "turn_x", "session_id": "ses_x"},
    "turn_wait": {"turn_id": "turn_x", "session_id": "ses_x"},
    "turn_cancel": {"turn_id": "turn_x"},
    "session_switch": {"session_id": "ses_x"},
    "session_delete": {"session_id": "ses_x"},
}


async def test_store_errors_match_every_output_schema(tmp_path: Path, mode: str) -> None:
    state = tmp_path / "state-is-a-file"
    state.write_text("not a directory")
    settings = make_settings(tmp_path).model_copy(update={"state_dir": state})
    async with connect(tmp_path, mode=mode, settings=settings) as h:
        check = Checker((await h.client.list_tools()).tools)
        with anyio.fail_after(10):
            for tool in check.validators:
                arguments = VALID_ARGUMENTS.get(tool, {})
                result = await check.call(h, tool, arguments)
                assert result.is_error
                assert result.structured_content is not None
                # turn_cancel answers from memory: this process runs no such turn
                expected = {"turn_not_found"} if tool == "turn_cancel" else {"store_error", "internal_error"}
                assert result.structured_content["error"]["type"] in expected
