"""How many model calls one provider has in flight at once: no cap of the HTTP client's own by default (httpx's
would stop at 100), `max_connections` when set. Against a real HTTP server on 127.0.0.1 that holds every request
until as many as the test wants are open at once."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import pytest
from anyio.abc import SocketStream

from agent_server.errors import ModelError
from agent_server.llm.anthropic import AnthropicLLM
from agent_server.llm.base import ModelRequest
from agent_server.llm.openai import OpenAIChatLLM
from agent_server.settings import AnthropicOptions, OpenAIOptions
from agent_server.types import Message, TextPart
from tests.fakes.openai_server import completion

pytestmark = pytest.mark.anyio

REQUEST = ModelRequest(messages=[Message(role="user", content=[TextPart(text="hi")])])
ANTHROPIC_ANSWER = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


@dataclass
class Gate:
    """Answers nothing until `release_at` requests are open at once (`reached`), then every one; with
    `auto_release` off, only once the test sets `released`."""

    release_at: int
    body: bytes
    auto_release: bool = True
    open_now: int = 0
    most: int = 0
    reached: anyio.Event = field(default_factory=anyio.Event)
    released: anyio.Event = field(default_factory=anyio.Event)

    async def serve(self, stream: SocketStream) -> None:
        async with stream:
            data = b""
            while b"\r\n\r\n" not in data:
                data += await stream.receive()
            head, _, rest = data.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
            )
            while len(rest) < length:
                rest += await stream.receive()
            self.open_now += 1
            self.most = max(self.most, self.open_now)
            if self.open_now >= self.release_at:
                self.reached.set()
                if self.auto_release:
                    self.released.set()
            await self.released.wait()
            self.open_now -= 1
            head_out = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(self.body)}\r\n\r\n"
            await stream.send(head_out.encode() + self.body)


@asynccontextmanager
async def gate_server(gate: Gate) -> AsyncIterator[str]:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, gate.serve)
        yield f"http://127.0.0.1:{port}"
        tg.cancel_scope.cancel()


async def _calls(llm: OpenAIChatLLM | AnthropicLLM, n: int) -> None:
    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(llm.complete, REQUEST)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_more_than_a_hundred_model_calls_are_in_flight_at_once_by_default(provider: str) -> None:
    calls = 130
    body = json.dumps(completion("ok") if provider == "openai" else ANTHROPIC_ANSWER).encode()
    gate = Gate(release_at=calls, body=body)
    async with gate_server(gate) as url:
        if provider == "openai":
            llm: OpenAIChatLLM | AnthropicLLM = OpenAIChatLLM(
                OpenAIOptions(base_url=f"{url}/v1", stream=False, max_attempts=1), api_key=None, model="m"
            )
        else:
            llm = AnthropicLLM(AnthropicOptions(base_url=url, stream=False, max_attempts=1), api_key="k", model="m")
        try:
            with anyio.fail_after(30):
                await _calls(llm, calls)
        finally:
            await llm.aclose()
    assert gate.most == calls


async def test_max_connections_bounds_the_calls_in_flight() -> None:
    """Two connections: a third call waits for one, and fails after `connect_timeout_s` while both stay busy."""
    gate = Gate(release_at=2, body=json.dumps(completion("ok")).encode(), auto_release=False)
    async with gate_server(gate) as url:
        options = OpenAIOptions(
            base_url=f"{url}/v1", stream=False, max_attempts=1, max_connections=2, connect_timeout_s=0.3
        )
        llm = OpenAIChatLLM(options, api_key=None, model="m")
        try:
            with anyio.fail_after(30):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_calls, llm, 2)
                    await gate.reached.wait()
                    with pytest.raises(ModelError) as caught:
                        await llm.complete(REQUEST)
                    gate.released.set()
        finally:
            await llm.aclose()
    assert gate.most == 2
    assert "timed out" in caught.value.message.lower() or "timeout" in caught.value.message.lower()
