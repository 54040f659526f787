"""The OpenAI provider against LLMock (PyPI `llmock`), a third-party fault-injecting OpenAI-compatible server.

The faults it already has that local servers show: a stream that ends early after HTTP 200 (`truncate`,
as llama-cpp-python's does when it cannot stream tool calls), a prompt over the server's context window,
and 5xx errors. LLMock is installed apart from the project's environment, so its server stack never
changes ours: `pip install --target tests/thirdparty/.llmock -r tests/thirdparty/llmock-requirements.txt`.
Without it these tests skip, unless AGENT_SERVER_REQUIRE_LLMOCK=1 (CI sets it).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from anyio.streams.text import TextReceiveStream

from agent_server.errors import ModelError
from agent_server.llm.anthropic import AnthropicLLM
from agent_server.llm.base import ModelRequest
from agent_server.llm.openai import OpenAIChatLLM
from agent_server.llm.openai_responses import OpenAIResponsesLLM
from agent_server.settings import AnthropicOptions, OpenAIOptions
from agent_server.types import Message, ToolSpec

pytestmark = pytest.mark.anyio

TARGET = Path(__file__).resolve().parent / ".llmock"
CONTEXT_TOKENS = 2000
REQUEST = ModelRequest(messages=[Message(role="user", content="List the files.")], tools=[ToolSpec(name="list_dir")])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
async def llmock() -> AsyncIterator[str]:
    """An LLMock server on a free port (a context window of CONTEXT_TOKENS); yields its base URL."""
    if not (TARGET / "llmock").is_dir():
        problem = "llmock not installed: see tests/thirdparty/test_llmock.py"
        if os.environ.get("AGENT_SERVER_REQUIRE_LLMOCK") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    port = _free_port()
    argv = [sys.executable, "-c", "from llmock.cli import app; app()", "serve", "--port", str(port)]
    argv += ["--context-window", str(CONTEXT_TOKENS), "--response-style", "static"]
    env = {**os.environ, "PYTHONPATH": str(TARGET), "NO_COLOR": "1"}
    process = await anyio.open_process(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert process.stderr is not None
        with anyio.fail_after(30):
            seen = ""
            async for text in TextReceiveStream(process.stderr):
                seen += text
                if "Uvicorn running on" in seen:
                    break
            else:
                pytest.fail(f"llmock exited before serving: {seen[-2000:]}")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        with anyio.fail_after(10):
            await process.wait()


async def _scenario(base: str, *behaviors: dict[str, Any]) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.post(f"{base}/_llmock/scenario", json={"behaviors": list(behaviors)})
        response.raise_for_status()


async def _requests(base: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient() as client:
        return (await client.get(f"{base}/_llmock/requests")).json()["requests"]


async def _verdict(base: str) -> dict[str, Any]:
    async with httpx.AsyncClient() as client:
        return (await client.get(f"{base}/_llmock/verdict")).json()


def _provider(base: str, retries: list[str], **options: Any) -> OpenAIChatLLM:
    async def on_retry(attempt: int, reason: str) -> None:
        retries.append(reason)

    opts = OpenAIOptions(base_url=f"{base}/v1", backoff_base_s=0, backoff_max_s=0, **options)
    return OpenAIChatLLM(opts, api_key="sk-test-llmock", model="gpt-4o-mini", on_retry=on_retry)


async def test_a_stream_truncated_before_any_chunk_falls_back_to_an_unstreamed_request(llmock: str) -> None:
    await _scenario(llmock, {"type": "stream_fault", "kind": "truncate", "after_chunks": 0})
    retries: list[str] = []
    llm = _provider(llmock, retries)
    try:
        with anyio.fail_after(20):
            response = await llm.complete(REQUEST)
    finally:
        await llm.aclose()
    assert [call.name for call in response.tool_calls] == ["list_dir"]  # LLMock calls an offered tool
    assert len(retries) == 1 and "retrying once without streaming" in retries[0]
    # LLMock's verdict groups attempts by identical bodies, so it cannot see that the unstreamed request
    # was the retry of the truncated one: judge from its request log instead.
    served = [(r["stream"], r["fault"], r["status"], r["completed"]) for r in await _requests(llmock)]
    assert served == [(True, "stream:truncate@0", 200, False), (False, None, 200, True)]


async def test_a_stream_truncated_after_text_is_retried_and_never_accepted(llmock: str) -> None:
    await _scenario(llmock, {"type": "stream_fault", "kind": "truncate", "after_chunks": 2})
    retries: list[str] = []
    llm = _provider(llmock, retries)
    plain = ModelRequest(messages=[Message(role="user", content="Say something.")])
    try:
        with anyio.fail_after(20):
            response = await llm.complete(plain, on_text=_ignore)
    finally:
        await llm.aclose()
    assert response.text
    assert len(retries) == 1 and "ended before data: [DONE]" in retries[0]
    assert "the text it streamed is discarded" in retries[0]
    verdict = await _verdict(llmock)  # LLMock's own judgement: no truncated stream accepted, and so on
    assert verdict["faults_injected"] == 1 and verdict["errors"] == 0, verdict


async def test_a_prompt_over_the_servers_window_fails_at_once_with_its_reason(llmock: str) -> None:
    retries: list[str] = []
    llm = _provider(llmock, retries, stream=False)
    huge = ModelRequest(messages=[Message(role="user", content="word " * (CONTEXT_TOKENS * 2))])
    try:
        with anyio.fail_after(20), pytest.raises(ModelError) as caught:
            await llm.complete(huge)
    finally:
        await llm.aclose()
    assert retries == []
    assert "HTTP 400" in caught.value.message and "context" in caught.value.message.lower()
    assert "sk-test-llmock" not in caught.value.message
    assert (await _verdict(llmock))["errors"] == 0  # e.g. no retry of a request that cannot pass


async def _ignore(_text: str) -> None:
    pass


# --- the provider contract against LLMock, for each of the three APIs -------------------------------------------


def _api_provider(api: str, base: str, retries: list[str], **options: Any) -> Any:
    async def on_retry(attempt: int, reason: str) -> None:
        retries.append(reason)

    fast = {"backoff_base_s": 0, "backoff_max_s": 0, **options}
    if api == "anthropic":
        opts = AnthropicOptions(base_url=f"{base}/anthropic", **fast)
        return AnthropicLLM(opts, api_key="sk-ant-llmock", model="claude-sonnet-4-6", on_retry=on_retry)
    if api == "openai-responses":
        responses = OpenAIOptions(base_url=f"{base}/v1", **fast)
        return OpenAIResponsesLLM(responses, api_key="sk-test-llmock", model="gpt-4o-mini", on_retry=on_retry)
    chat = OpenAIOptions(base_url=f"{base}/v1", **fast)
    return OpenAIChatLLM(chat, api_key="sk-test-llmock", model="gpt-4o-mini", on_retry=on_retry)


APIS = ["openai", "anthropic", "openai-responses"]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_each_api_runs_a_tool_round_against_llmock(llmock: str, api: str, stream: bool) -> None:
    retries: list[str] = []
    llm = _api_provider(api, llmock, retries, stream=stream)
    tokens: list[str] = []

    async def on_text(text: str) -> None:
        tokens.append(text)

    try:
        with anyio.fail_after(20):
            first = await llm.complete(REQUEST)
            (call,) = first.tool_calls
            history = [
                *REQUEST.messages,
                Message(role="assistant", content=first.text, tool_calls=first.tool_calls, native=first.native),
                Message(role="tool", tool_call_id=call.id, name=call.name, content="a.txt b.txt"),
            ]
            second = await llm.complete(ModelRequest(messages=history, tools=REQUEST.tools), on_text=on_text)
    finally:
        await llm.aclose()
    assert call.name == "list_dir" and call.arguments_error is None and first.stop_reason == "tool_use"
    assert second.text and not second.tool_calls and second.stop_reason == "end_turn"
    assert "".join(tokens) == second.text
    assert second.usage.prompt_tokens and second.usage.completion_tokens
    assert retries == []
    assert (await _verdict(llmock))["errors"] == 0


@pytest.mark.parametrize("api", APIS)
async def test_each_api_retries_a_429_and_a_stream_cut_mid_way_on_llmock(llmock: str, api: str) -> None:
    await _scenario(
        llmock,
        {"type": "fail", "status": 429, "retry_after": 0},
        {"type": "stream_fault", "kind": "disconnect", "after_chunks": 3},
    )
    retries: list[str] = []
    llm = _api_provider(api, llmock, retries)
    plain = ModelRequest(messages=[Message(role="user", content="Say something.")])
    try:
        with anyio.fail_after(20):
            response = await llm.complete(plain, on_text=_ignore)
    finally:
        await llm.aclose()
    assert response.text
    assert len(retries) == 2 and "HTTP 429" in retries[0], retries
    served = [(r["status"], r["fault"]) for r in await _requests(llmock)]
    assert len(served) == 3 and served[0][0] == 429 and served[2] == (200, None), served


@pytest.mark.parametrize("api", APIS)
async def test_each_api_fails_at_once_on_a_401_from_llmock(llmock: str, api: str) -> None:
    await _scenario(llmock, {"type": "fail", "status": 401, "message": "invalid x-api-key"})
    retries: list[str] = []
    llm = _api_provider(api, llmock, retries)
    try:
        with anyio.fail_after(20), pytest.raises(ModelError) as caught:
            await llm.complete(REQUEST)
    finally:
        await llm.aclose()
    assert retries == [] and caught.value.status == 401
    assert "authentication failed" in caught.value.message and "invalid x-api-key" in caught.value.message
    assert "sk-ant-llmock" not in caught.value.message and "sk-test-llmock" not in caught.value.message
