"""The OpenAI-compatible provider's own overhead per model call, as a ratio to a bare httpx request.

Both hit the same local fake Chat Completions server (a real HTTP server on 127.0.0.1, the one the
tests use) with the same scripted reply, in one run, alternating provider and bare httpx call by call
over several rounds. The bare call does what any client must: POST the body and read the whole
response. The provider also builds the request from messages, parses SSE or JSON into a
`ModelResponse`, and assembles usage. Reported: median microseconds per call of each and the ratio.

Then the time per model call of each provider side by side: Chat Completions, Anthropic Messages and
OpenAI Responses, each against a fake of its own API answering the same text (`tests/fakes/dialects.py`),
interleaved call by call; reported as each one's median and its ratio to Chat Completions.

    python bench/provider_overhead.py [--calls 200] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent_server.llm.base import ModelRequest  # noqa: E402
from agent_server.llm.openai import OpenAIChatLLM  # noqa: E402
from agent_server.settings import OpenAIOptions  # noqa: E402
from agent_server.types import Message  # noqa: E402
from tests.fakes.dialects import DIALECTS, Answer  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer, Reply, completion, text_stream  # noqa: E402

REQUEST = ModelRequest(messages=[Message(role="system", content="Be terse."), Message(role="user", content="Hi")])
PIECES = ("The answer ", "is forty", "-two, as ", "always.")


def _reply(stream: bool) -> Reply:
    return Reply(sse=text_stream(*PIECES)) if stream else Reply(json=completion("".join(PIECES)))


async def _provider_call(llm: OpenAIChatLLM) -> None:
    await llm.complete(REQUEST)


async def _bare_call(http: httpx.AsyncClient, url: str, stream: bool) -> None:
    body = {"model": "fake-model", "messages": [{"role": "user", "content": "Hi"}], "stream": stream}
    async with http.stream("POST", url, json=body) as response:
        async for _ in response.aiter_bytes():
            pass


async def measure(stream: bool, calls: int, rounds: int) -> dict[str, float]:
    provider_times: list[float] = []
    bare_times: list[float] = []
    async with FakeOpenAIServer() as server, httpx.AsyncClient() as http:
        options = OpenAIOptions(base_url=server.base_url, stream=stream, max_attempts=1)
        llm = OpenAIChatLLM(options, api_key=None, model="fake-model", http_client=http)
        url = server.base_url.rstrip("/") + "/chat/completions"
        for _ in range(rounds):
            for _ in range(calls):
                for name in ("provider", "bare"):
                    server.add(_reply(stream))
                    started = time.perf_counter()
                    if name == "provider":
                        await _provider_call(llm)
                        provider_times.append(time.perf_counter() - started)
                    else:
                        await _bare_call(http, url, stream)
                        bare_times.append(time.perf_counter() - started)
    provider, bare = statistics.median(provider_times), statistics.median(bare_times)
    return {"provider_us": provider * 1e6, "bare_httpx_us": bare * 1e6, "ratio": provider / bare}


async def measure_apis(stream: bool, calls: int, rounds: int) -> dict[str, dict[str, float]]:
    """Median microseconds per call of each API's provider, interleaved, and the ratio to Chat Completions."""
    times: dict[str, list[float]] = {d.name: [] for d in DIALECTS}
    answer = Answer(text=list(PIECES))
    async with FakeOpenAIServer() as server:
        llms = {d.name: d.provider(server, key=None, stream=stream, max_attempts=1) for d in DIALECTS}
        try:
            for _ in range(rounds * calls):
                for dialect in DIALECTS:
                    server.add(dialect.answer(answer, stream=stream))
                    started = time.perf_counter()
                    await llms[dialect.name].complete(REQUEST)
                    times[dialect.name].append(time.perf_counter() - started)
        finally:
            for llm in llms.values():
                await llm.aclose()
    base = statistics.median(times["openai"])
    return {
        name: {"us": statistics.median(samples) * 1e6, "ratio": statistics.median(samples) / base}
        for name, samples in times.items()
    }


async def main_async(calls: int, rounds: int) -> dict[str, Any]:
    return {
        "streaming": await measure(True, calls, rounds),
        "non_streaming": await measure(False, calls, rounds),
        "apis_streaming": await measure_apis(True, calls, rounds),
        "apis_non_streaming": await measure_apis(False, calls, rounds),
        "load": os.getloadavg(),
        "cores": os.cpu_count(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = anyio.run(main_async, args.calls, args.rounds)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for mode in ("streaming", "non_streaming"):
        r = result[mode]
        print(
            f"provider overhead ({mode}): provider {r['provider_us']:.0f} us/call, "
            f"bare httpx {r['bare_httpx_us']:.0f} us/call, ratio {r['ratio']:.2f}"
        )
    for mode in ("streaming", "non_streaming"):
        apis = result[f"apis_{mode}"]
        line = ", ".join(f"{name} {r['us']:.0f} us (ratio {r['ratio']:.2f})" for name, r in apis.items())
        print(f"per model call by API ({mode}, ratio to openai chat completions): {line}")
    load = " ".join(f"{x:.2f}" for x in result["load"])
    print(f"load {load}, {result['cores']} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
