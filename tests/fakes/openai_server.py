"""A real HTTP/1.1 server on 127.0.0.1 that replays scripted OpenAI-format responses.

It listens on an ephemeral port in the test's own event loop (anyio TCP listener, HTTP framing by
`h11`, which httpx already depends on), answers each request with the next queued `Reply` and
records what it received. Replies can stream SSE chunks, cut the connection after N chunks, or
stall (send nothing more) until the client hangs up, which the server records.

```python
async with FakeOpenAIServer() as server:
    server.add(Reply(sse=text_chunks("Hello", " world")))
    llm = OpenAIChatLLM(OpenAIOptions(base_url=server.base_url), api_key=None, model="m")
```

`Quirks` make it behave like the local servers users run (each was seen on llama-cpp-python's or
llama.cpp's server): they are checked before a scripted reply is taken, and answer on their own.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import anyio
import h11
from anyio.abc import Listener, SocketAttribute, SocketStream, TaskGroup

MODEL = "fake-model"


@dataclass
class Reply:
    """One scripted HTTP response.

    `json` gives a JSON body, `sse` an event stream (dict events are JSON-encoded, str events sent
    as their data verbatim) ending with `data: [DONE]` unless `done` is False. `cut_after=N` drops
    the connection after N SSE events; `stall_after=N` sends N events and then nothing until the
    client disconnects; `stall=True` stalls before sending anything.
    """

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict[str, str])
    json: Any = None
    body: bytes | None = None
    sse: list[Any] | None = None
    done: bool = True
    cut_after: int | None = None
    stall_after: int | None = None
    stall: bool = False
    poison: bool = False
    """Keep the connection open after this reply, then drop the next request sent on it unanswered."""
    match: Callable[[Any], bool] | None = None
    """Only for a request whose JSON body this accepts; the first matching reply in the queue is taken."""


@dataclass
class Quirks:
    """Local-server behaviour, off by default.

    `reject_null_content`: an assistant message with `"content": null` gets HTTP 500 with a long
    pydantic validation text whose decisive line is the last. `no_streamed_tools`: a streamed request
    with tools gets HTTP 200 and an event stream that ends at once without `[DONE]`, and its
    connection then drops the next request sent on it unanswered. `context_tokens`: a request whose
    estimated tokens (body length / 4) exceed it gets HTTP 400, as llama.cpp's n_ctx does.
    """

    reject_null_content: bool = False
    no_streamed_tools: bool = False
    context_tokens: int | None = None


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class FakeOpenAIServer:
    """Serve scripted replies.

    `requests` is every request received; `connections` counts accepted TCP connections and
    `disconnects` the stalled replies the client hung up on.
    """

    def __init__(self, quirks: Quirks | None = None, *, responder: Callable[[Received], Reply] | None = None) -> None:
        self.quirks = quirks or Quirks()
        self.responder = responder
        """Answers a request for which no queued reply matches (a fake model that computes its replies)."""
        self.replies: deque[Reply] = deque()
        self.requests: list[Received] = []
        self.disconnects = 0
        self.connections = 0
        self.disconnected = anyio.Event()
        self.port = 0
        self._tg: TaskGroup | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """The server without `/v1` (Anthropic's SDK convention: the client appends `/v1/messages`)."""
        return f"http://127.0.0.1:{self.port}"

    def add(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def wait_for_disconnects(self, count: int) -> None:
        """Wait until the client has hung up on `count` stalled replies (bound it with `fail_after`)."""
        while self.disconnects < count:
            await self.disconnected.wait()
            self.disconnected = anyio.Event()

    async def __aenter__(self) -> FakeOpenAIServer:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = listener.extra(SocketAttribute.local_port)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._serve, listener)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(exc_type, exc, tb)

    async def _serve(self, listener: Listener[SocketStream]) -> None:
        async with listener:
            await listener.serve(self._handle)

    async def _handle(self, stream: SocketStream) -> None:
        self.connections += 1
        conn = h11.Connection(h11.SERVER)
        async with stream:
            try:
                while await self._read_request(conn, stream):
                    quirk = _quirk_reply(self.quirks, self.requests[-1])
                    reply = quirk or self._take(self.requests[-1])
                    if not await self._respond(conn, stream, reply):
                        return
                    conn.start_next_cycle()
                    if quirk is not None and quirk.poison:
                        await self._read_request(conn, stream)  # ...and hang up on it unanswered
                        return
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, h11.ProtocolError):
                return

    def _take(self, request: Received) -> Reply:
        for reply in self.replies:
            if reply.match is None or reply.match(request.json):
                self.replies.remove(reply)
                return reply
        return self.responder(request) if self.responder is not None else _exhausted()

    async def _read_request(self, conn: h11.Connection, stream: SocketStream) -> bool:
        request: h11.Request | None = None
        body = b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                try:
                    conn.receive_data(await stream.receive())
                except anyio.EndOfStream:
                    conn.receive_data(b"")
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage) and request is not None:
                headers = {k.decode().lower(): v.decode() for k, v in request.headers}
                self.requests.append(Received(request.method.decode(), request.target.decode(), headers, body))
                return True
            else:  # ConnectionClosed or PAUSED: the client is gone
                return False

    async def _respond(self, conn: h11.Connection, stream: SocketStream, reply: Reply) -> bool:
        """Send `reply`; False when the connection was cut or stalled and must not be reused."""
        if reply.stall:
            await self._wait_for_disconnect(stream)
            return False
        if reply.sse is None:
            body = reply.body if reply.body is not None else json.dumps(reply.json).encode()
            headers = {"content-type": "application/json", "content-length": str(len(body)), **reply.headers}
            await stream.send(conn.send(h11.Response(status_code=reply.status, headers=list(headers.items()))))
            await stream.send(conn.send(h11.Data(data=body)))
            await stream.send(conn.send(h11.EndOfMessage()))
            return True
        headers = {"content-type": "text/event-stream", **reply.headers}
        await stream.send(conn.send(h11.Response(status_code=reply.status, headers=list(headers.items()))))
        events = [e if isinstance(e, str) else json.dumps(e) for e in reply.sse] + (["[DONE]"] if reply.done else [])
        for index, data in enumerate(events):
            if index == reply.cut_after:
                return False
            if index == reply.stall_after:
                await self._wait_for_disconnect(stream)
                return False
            await stream.send(conn.send(h11.Data(data=f"data: {data}\n\n".encode())))
        await stream.send(conn.send(h11.EndOfMessage()))
        return True

    async def _wait_for_disconnect(self, stream: SocketStream) -> None:
        try:
            while True:
                await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            self.disconnects += 1
            self.disconnected.set()


def _quirk_reply(quirks: Quirks, request: Received) -> Reply | None:
    body = request.json
    messages = body.get("messages", [])
    if quirks.reject_null_content and any(
        m.get("role") == "assistant" and m.get("content", "") is None for m in messages
    ):
        return Reply(status=500, json={"error": {"message": _null_content_error(messages)}})
    if quirks.context_tokens is not None and len(request.body) // 4 > quirks.context_tokens:
        tokens = len(request.body) // 4
        message = f"the request exceeds the available context size ({tokens} > {quirks.context_tokens} tokens)"
        return Reply(status=400, json={"error": {"code": 400, "message": message, "type": "exceed_context_size_error"}})
    if quirks.no_streamed_tools and body.get("stream") and body.get("tools"):
        return Reply(sse=[], done=False, poison=True)
    return None


def _null_content_error(messages: list[dict[str, Any]]) -> str:
    """Like pydantic's answer in llama-cpp-python: every union member fails, the string one last."""
    index = next(i for i, m in enumerate(messages) if m.get("role") == "assistant" and m.get("content", "") is None)
    members = [
        f"body.messages.{index}.typed-dict.{role}.role\n  Input should be '{role}' [type=literal_error]"
        for role in ("system", "user", "tool", "function")
        for _ in range(6)
    ]
    decisive = (
        f"body.messages.{index}.typed-dict.assistant.content.str\n"
        "  Input should be a valid string [type=string_type, input_value=None]"
    )
    return f"{len(members) + 1} validation errors for CreateChatCompletionRequest\n" + "\n".join([*members, decisive])


def _exhausted() -> Reply:
    return Reply(status=599, json={"error": {"message": "fake server: no scripted reply left"}})


# --- OpenAI-format builders ----------------------------------------------------------------


def chunk(
    *,
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    reasoning: str | None = None,
    finish_reason: str | None = None,
    model: str = MODEL,
) -> dict[str, Any]:
    """One `chat.completion.chunk` with a single choice."""
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": model, "choices": [choice]}


def usage_chunk(prompt: int, completion: int, *, model: str = MODEL) -> dict[str, Any]:
    """The last chunk of a stream with `include_usage`: no choices, only usage."""
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": model, "choices": [], "usage": usage}


def call_delta(index: int, *, id: str | None = None, name: str | None = None, arguments: str = "") -> dict[str, Any]:
    """A tool-call delta; `id` and `name` normally come only in a call's first delta."""
    function: dict[str, Any] = {"arguments": arguments}
    if name is not None:
        function["name"] = name
    delta: dict[str, Any] = {"index": index, "function": function}
    if id is not None:
        delta.update(id=id, type="function")
    return delta


def text_stream(
    *pieces: str, prompt: int = 10, completion: int = 5, finish_reason: str = "stop"
) -> list[dict[str, Any]]:
    """SSE events of a plain text answer streamed in `pieces`, with a usage chunk (`finish_reason="length"`:
    an answer cut at the token limit)."""
    return [
        chunk(content=""),
        *(chunk(content=p) for p in pieces),
        chunk(finish_reason=finish_reason),
        usage_chunk(prompt, completion),
    ]


def completion(
    content: str | None,
    *,
    tool_calls: Sequence[tuple[str, str, str]] = (),
    reasoning: str | None = None,
    prompt: int = 10,
    completion_tokens: int = 5,
    model: str = MODEL,
    usage: bool = True,
    finish_reason: str | None = None,
) -> dict[str, Any]:
    """A non-streamed `chat.completion`; `tool_calls` as `(id, name, arguments_json)`; `usage=False` omits usage.

    `finish_reason` defaults to `tool_calls` with tool calls, else `stop` (`length`: cut at the token limit)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in tool_calls
        ]
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    total = prompt + completion_tokens
    usage_fields = {"prompt_tokens": prompt, "completion_tokens": completion_tokens, "total_tokens": total}
    finish = finish_reason or ("tool_calls" if tool_calls else "stop")
    choice = {"index": 0, "message": message, "finish_reason": finish}
    reply = {"id": "chatcmpl-1", "object": "chat.completion", "model": model, "choices": [choice]}
    return {**reply, "usage": usage_fields} if usage else reply
