"""Whole turns on the Anthropic Messages provider against a fake that accounts for prompt caching as the API
documents it (`tests/fakes/anthropic_server.py`): the cache-read share of every round, and thinking blocks sent
back unchanged."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from agent_server.llm.anthropic import AnthropicLLM
from agent_server.server.app import create_server
from agent_server.settings import AnthropicOptions
from tests.fakes.anthropic_server import AnthropicModel, Say
from tests.fakes.openai_server import FakeOpenAIServer
from tests.interaction.harness import MODES, make_settings

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("mode", MODES)]

INSTRUCTIONS = "Project rules: " + " ".join(f"rule {i}: keep module {i} small and its names plain." for i in range(120))
"""A system prompt above the model's minimum cacheable length, as real project instructions are."""
ROUNDS = 10


@dataclass
class Turns:
    client: Client
    model: AnthropicModel
    server: FakeOpenAIServer
    workspace: Path

    async def turn(self, prompt: str) -> dict[str, Any]:
        result = await self.client.call_tool("run_turn", {"prompt": prompt, "detail": "full"})
        return result.structured_content or {}


@asynccontextmanager
async def anthropic(tmp_path: Path, mode: str, model: AnthropicModel, **options: Any) -> AsyncIterator[Turns]:
    async with FakeOpenAIServer(responder=model) as server:
        opts = AnthropicOptions(base_url=server.root_url, backoff_base_s=0, backoff_max_s=0, **options)
        config = make_settings(tmp_path, system_prompt=INSTRUCTIONS, anthropic=opts)
        llm = AnthropicLLM(opts, api_key="sk-ant-test", model="claude-sonnet-4-5")
        try:
            with anyio.fail_after(30):
                async with Client(create_server(config, llm=llm), mode=mode) as client:
                    yield Turns(client, model, server, config.workspace)
        finally:
            await llm.aclose()


def reads(rounds: int) -> list[Say]:
    calls = [Say(calls=[(f"toolu_{i}", "read_file", {"path": f"part{i}.txt"})]) for i in range(rounds - 1)]
    return [*calls, Say(text="All parts read.")]


async def test_from_the_second_round_on_nine_tenths_of_the_input_is_read_from_the_cache(
    tmp_path: Path, mode: str
) -> None:
    model = AnthropicModel(*reads(ROUNDS))
    async with anthropic(tmp_path, mode, model) as h:
        for i in range(ROUNDS - 1):
            (h.workspace / f"part{i}.txt").write_text(f"part {i}: " + "some text of this part. " * 12)
        record = await h.turn("Read every part, one at a time")
        model.add(Say(text="Again."))
        again = await h.turn("And once more?")
    assert record["status"] == "completed", record
    accounted = model.accounted
    shares = [round(usage.read_share, 3) for usage in accounted]
    assert shares[0] == 0 and all(share >= 0.9 for share in shares[1:]), shares  # the next turn's first too
    # Each round reads all of the previous request from the cache: only its own new messages are not read.
    assert [u.cache_read_input_tokens for u in accounted[1:]] == [u.total for u in accounted[:-1]]
    first_calls = record["assistant_turns"]
    assert [t["usage"]["cache_read_tokens"] for t in first_calls] == [
        u.cache_read_input_tokens for u in model.accounted[:ROUNDS]
    ]
    assert first_calls[0]["usage"]["cache_write_tokens"] > 0
    turn_usage = record["usage"]
    assert turn_usage["cache_read_tokens"] == sum(u.cache_read_input_tokens for u in model.accounted[:ROUNDS])
    assert turn_usage["prompt_tokens"] == sum(u.total for u in model.accounted[:ROUNDS])
    assert turn_usage["cost_usd"] is not None  # claude-sonnet-4-5 is in the price table, cache rates too
    assert again["usage"]["cache_read_tokens"] > 0.9 * again["usage"]["prompt_tokens"]
    bodies = [r.json for r in h.server.requests]
    assert all(sum(json.dumps(b).count('"cache_control"') for b in [body]) <= 4 for body in bodies)


async def test_without_caching_no_breakpoint_is_sent_and_nothing_is_read(tmp_path: Path, mode: str) -> None:
    model = AnthropicModel(*reads(3))
    async with anthropic(tmp_path, mode, model, cache=False) as h:
        for i in range(2):
            (h.workspace / f"part{i}.txt").write_text("text " * 200)
        record = await h.turn("Read the parts")
    assert record["status"] == "completed"
    assert all("cache_control" not in r.body.decode() for r in h.server.requests)
    assert [u.cache_read_input_tokens for u in model.accounted] == [0, 0, 0]


async def test_a_thinking_turn_sends_the_first_rounds_thinking_block_back_byte_identical(
    tmp_path: Path, mode: str
) -> None:
    thought = "The user wants notes.txt; reading it first is the safe move."
    model = AnthropicModel(
        Say(thinking=thought, calls=[("toolu_1", "read_file", {"path": "notes.txt"})]),
        Say(thinking="It says hello.", text="It says hello."),
        Say(text="Still hello."),
    )
    async with anthropic(tmp_path, mode, model, thinking_budget_tokens=2048) as h:
        (h.workspace / "notes.txt").write_text("hello\n")
        record = await h.turn("What does notes.txt say?")
        later = await h.turn("And now?")
    assert record["status"] == "completed" and record["final_text"] == "It says hello.", record
    assert later["status"] == "completed", later  # the fake refuses (400) a tool loop without its thinking block
    first, second = (r.json for r in h.server.requests[:2])
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048} and "temperature" not in first
    sent_back = second["messages"][-2]["content"][0]
    given = model.sent_thinking["toolu_1"]
    assert json.dumps(sent_back, sort_keys=True) == json.dumps(given, sort_keys=True)
    assert sent_back["signature"] == given["signature"] and sent_back["thinking"] == thought
    third = h.server.requests[2].json  # the next turn: the stored history still carries the block
    assert any(block == given for m in third["messages"] for block in m["content"])
