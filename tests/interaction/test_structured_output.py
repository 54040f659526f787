"""`run_turn(output_schema=...)`: the final answer must be a JSON value valid against the schema.

Through the in-memory client in both protocol eras, with the scripted model checking what it receives (the
schema in its system prompt, the repair message), and with the real OpenAI provider against the fake server
(the schema sent natively as `response_format`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_server.output_schema import MAX_SCHEMA_DEPTH
from tests.fakes.openai_server import Reply, completion
from tests.interaction.harness import MODES, connect
from tests.interaction.openai_harness import local

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("mode", MODES)]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"enum": ["approve", "reject"]},
        "issues": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["verdict", "issues"],
    "additionalProperties": False,
}
GOOD = {"verdict": "approve", "issues": []}


def system_prompt(request: Any) -> str:
    return request.messages[0].text()


async def test_a_valid_answer_is_the_structured_output(tmp_path: Path, mode: str) -> None:
    async with connect(tmp_path, [{"content": json.dumps(GOOD)}], mode=mode) as h:
        result = await h.call("run_turn", {"prompt": "Review it", "output_schema": SCHEMA})
        request = h.llm.calls[0]
    record = result.structured_content or {}
    assert record["status"] == "completed", record
    assert record["structured_output"] == GOOD
    assert result.is_error is False
    assert json.loads(result.content[0].text) == GOOD  # type: ignore[union-attr]
    assert request.output_schema == SCHEMA  # the provider is handed the schema (native structured output)
    system = system_prompt(request)
    assert "single JSON value" in system and '"verdict"' in system  # and the model is told it in words


async def test_a_fenced_answer_is_read_as_its_json(tmp_path: Path, mode: str) -> None:
    fenced = "```json\n" + json.dumps(GOOD) + "\n```"
    async with connect(tmp_path, [{"content": fenced}], mode=mode) as h:
        result = await h.call("run_turn", {"prompt": "Review it", "output_schema": SCHEMA})
    assert (result.structured_content or {})["structured_output"] == GOOD


async def test_an_invalid_answer_is_repaired_once_with_what_was_wrong(tmp_path: Path, mode: str) -> None:
    wrong = {"verdict": "maybe", "issues": []}
    script = [{"content": json.dumps(wrong)}, {"expect_contains": "does not match", "content": json.dumps(GOOD)}]
    async with connect(tmp_path, script, mode=mode) as h:
        result = await h.call("run_turn", {"prompt": "Review it", "output_schema": SCHEMA, "detail": "full"})
        repair = h.llm.calls[1]
    record = result.structured_content or {}
    assert record["status"] == "completed", record
    assert record["structured_output"] == GOOD
    last = repair.messages[-1]
    assert last.role == "user" and "'maybe' is not one of" in last.text() and "$.verdict" in last.text()
    assert repair.messages[-2].role == "assistant" and repair.messages[-2].text() == json.dumps(wrong)
    reasons = [t["reason"] for t in record["transitions"]]
    assert "answer_not_valid_against_output_schema" in reasons


async def test_an_answer_still_invalid_after_the_repair_fails_output_invalid(tmp_path: Path, mode: str) -> None:
    script = [{"content": "Looks fine to me."}, {"content": json.dumps({"verdict": "approve"})}]
    async with connect(tmp_path, script, mode=mode) as h:
        result = await h.call("run_turn", {"prompt": "Review it", "output_schema": SCHEMA})
        assert "not JSON" in h.llm.calls[1].messages[-1].text()
        assert h.llm.remaining == 0
    record = result.structured_content or {}
    assert result.is_error is True
    assert record["status"] == "failed"
    assert record["error"]["type"] == "output_invalid"
    assert "'issues' is a required property" in record["error"]["message"]
    assert record["structured_output"] is None


async def test_tool_rounds_come_before_the_structured_answer(tmp_path: Path, mode: str) -> None:
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"expect_contains": "hello", "content": json.dumps(GOOD)},
    ]
    async with connect(tmp_path, script, mode=mode) as h:
        (h.workspace / "a.txt").write_text("hello")
        result = await h.call("run_turn", {"prompt": "Review a.txt", "output_schema": SCHEMA})
    assert (result.structured_content or {})["structured_output"] == GOOD


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "nope"}, "not a valid JSON Schema"),
        ({"properties": {"x": {"type": "string", "description": "d" * 70_000}}}, "bytes of JSON"),
        (
            {"items": json.loads('{"items": ' * (MAX_SCHEMA_DEPTH + 1) + "{}" + "}" * (MAX_SCHEMA_DEPTH + 1))},
            "nests deeper",
        ),
    ],
    ids=["invalid", "large", "deep"],
)
async def test_a_bad_schema_is_refused_before_the_model_is_asked(
    tmp_path: Path, mode: str, schema: dict[str, Any], message: str
) -> None:
    async with connect(tmp_path, [], mode=mode) as h:
        result = await h.call("run_turn", {"prompt": "Review it", "output_schema": schema})
        assert not h.llm.calls
    assert result.is_error is True
    assert message in result.content[0].text  # type: ignore[union-attr]


async def test_the_openai_provider_asks_for_the_schema_natively(tmp_path: Path, mode: str) -> None:
    async with local(tmp_path, mode, openai={"stream": False}) as h:
        h.model.add(Reply(json=completion(json.dumps(GOOD))))
        record, _ = await h.turn("Review it", output_schema=SCHEMA)
        body = h.model.requests[0].json
    assert record["structured_output"] == GOOD
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": SCHEMA, "strict": False},
    }
