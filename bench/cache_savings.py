"""Input tokens paid per 10-round turn on the Anthropic provider, with prompt caching and without.

The real provider talks HTTP to the fake Anthropic model of the tests (`tests/fakes/anthropic_server.py`, a
server on 127.0.0.1 that accounts for cache reads and writes at the breakpoints the way the API documents).
Each turn is the loop's own shape: a system prompt and tool schemas of a realistic size, then `--rounds` model
calls, each one asking for a tool whose result (`--result-chars`) joins the conversation. Reported per round:
the cache-read share of its input; per turn: input tokens as billed (plain, cache writes at 1.25x, cache reads
at 0.1x, Anthropic's list rates) with and without caching, and the ratio.

    python bench/cache_savings.py [--rounds 10] [--result-chars 1200] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent_server.llm.anthropic import AnthropicLLM  # noqa: E402
from agent_server.llm.base import ModelRequest  # noqa: E402
from agent_server.settings import AnthropicOptions  # noqa: E402
from agent_server.types import Message, ToolSpec  # noqa: E402
from tests.fakes.anthropic_server import AnthropicModel, Say  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402

SYSTEM = "You are a coding agent. " + " ".join(f"Rule {i}: keep module {i} small and plain." for i in range(300))
TOOLS = [
    ToolSpec(
        name=name,
        description=f"{name}: " + "what it does, its arguments and its limits. " * 8,
        input_schema={"type": "object", "properties": {"path": {"type": "string", "description": "a path"}}},
    )
    for name in ("read_file", "list_dir", "search_text", "write_file", "edit_file", "run_command")
]
WRITE_RATE, READ_RATE = 1.25, 0.1


async def turn(*, cache: bool, rounds: int, result_chars: int) -> list[dict[str, Any]]:
    calls = [Say(calls=[(f"toolu_{i}", "read_file", {"path": f"f{i}.py"})]) for i in range(rounds - 1)]
    model = AnthropicModel(*calls, Say(text="Done."))
    async with FakeOpenAIServer(responder=model) as server:
        options = AnthropicOptions(base_url=server.root_url, cache=cache, max_attempts=1)
        llm = AnthropicLLM(options, api_key="sk-ant-bench", model="claude-sonnet-4-5")
        messages = [Message(role="system", content=SYSTEM), Message(role="user", content="Fix the bug in f*.py")]
        try:
            for _ in range(rounds):
                response = await llm.complete(ModelRequest(messages=messages, tools=TOOLS, session_id="ses_bench"))
                if not response.tool_calls:
                    break
                call = response.tool_calls[0]
                messages.append(Message(role="assistant", content=response.text, tool_calls=response.tool_calls))
                body = (
                    f"# {call.arguments['path']}\n"
                    + ("x = compute(x)  # a line of the file\n" * result_chars)[:result_chars]
                )
                messages.append(Message(role="tool", tool_call_id=call.id, name=call.name, content=body))
        finally:
            await llm.aclose()
    return [
        {
            "input": u.input_tokens,
            "cache_write": u.cache_creation_input_tokens,
            "cache_read": u.cache_read_input_tokens,
            "read_share": u.read_share,
            "billed": u.input_tokens
            + WRITE_RATE * u.cache_creation_input_tokens
            + READ_RATE * u.cache_read_input_tokens,
        }
        for u in model.accounted
    ]


async def main_async(rounds: int, result_chars: int) -> dict[str, Any]:
    cached = await turn(cache=True, rounds=rounds, result_chars=result_chars)
    uncached = await turn(cache=False, rounds=rounds, result_chars=result_chars)
    paid_cached = sum(r["billed"] for r in cached)
    paid_uncached = sum(r["billed"] for r in uncached)
    return {
        "rounds": cached,
        "input_tokens_billed_cached": paid_cached,
        "input_tokens_billed_uncached": paid_uncached,
        "ratio": paid_cached / paid_uncached,
        "load": os.getloadavg(),
        "cores": os.cpu_count(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--result-chars", type=int, default=1200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = anyio.run(main_async, args.rounds, args.result_chars)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"prompt caching over a {args.rounds}-round turn (Anthropic fake, cache accounted at the breakpoints)")
    for index, r in enumerate(result["rounds"], start=1):
        print(
            f"round {index}: input {r['input']}, cache write {r['cache_write']}, cache read {r['cache_read']}, "
            f"read share {r['read_share']:.1%}"
        )
    print(f"input tokens billed per turn, cached: {result['input_tokens_billed_cached']:.0f}")
    print(f"input tokens billed per turn, uncached: {result['input_tokens_billed_uncached']:.0f}")
    print(f"ratio (cached / uncached): {result['ratio']:.2f}")
    load = " ".join(f"{x:.2f}" for x in result["load"])
    print(f"load average (1/5/15 min): {load}")
    print(f"cores: {result['cores']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
