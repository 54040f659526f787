"""A minimal HTTP/1.1 client over anyio TCP streams, for `http_load.py`: no client library in the figure.

Enough of HTTP/1.1 for agent-server's `/mcp`: one request at a time per connection (keep-alive), bodies by
`Content-Length` or `Transfer-Encoding: chunked`, and SSE (`text/event-stream`) read event by event until the
JSON-RPC response of the request arrives. Its own CPU is a small fraction of the server's (the bench prints
both), so a burst measures the server, not the client.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import SocketStream

MAX_HEADER_BYTES = 64 * 1024
TIMEOUT_S = 120.0


class HttpFailure(RuntimeError):
    """A request that did not get a usable answer (the bench counts these)."""


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    messages: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    """The JSON-RPC messages of the body: one for JSON, every `data:` of an event stream."""


class Connection:
    """One TCP connection to `host:port`, requests sent one after another on it."""

    def __init__(self, stream: SocketStream, host: str, port: int) -> None:
        self._stream = stream
        self._host = f"{host}:{port}"
        self._buffer = bytearray()

    @classmethod
    async def open(cls, host: str, port: int) -> Connection:
        return cls(await anyio.connect_tcp(host, port), host, port)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def post(
        self,
        path: str,
        message: dict[str, Any] | None,
        headers: dict[str, str],
        *,
        method: str = "POST",
        on_message: Callable[[dict[str, Any]], bool] | None = None,
    ) -> Reply:
        """Send one request; read its reply. `on_message` sees each SSE message; True from it ends the read."""
        body = b"" if message is None else json.dumps(message, separators=(",", ":")).encode()
        head = [f"{method} {path} HTTP/1.1", f"Host: {self._host}", f"Content-Length: {len(body)}"]
        head += [f"{name}: {value}" for name, value in headers.items()]
        await self._stream.send(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        status, reply_headers = await self._read_head()
        reply = Reply(status, reply_headers)
        chunked = reply_headers.get("transfer-encoding", "").lower() == "chunked"
        if reply_headers.get("content-type", "").startswith("text/event-stream"):
            await self._read_events(reply, chunked, on_message)
        else:
            raw = await (
                self._read_chunked() if chunked else self._read_exactly(int(reply_headers.get("content-length", "0")))
            )
            if raw.strip():
                reply.messages.append(json.loads(raw))
        return reply

    async def _fill(self) -> None:
        try:
            data = await self._stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, OSError) as exc:
            raise HttpFailure(f"connection closed by the server: {exc!r}") from exc
        self._buffer += data

    async def _read_line(self) -> bytes:
        while (end := self._buffer.find(b"\r\n")) < 0:
            if len(self._buffer) > MAX_HEADER_BYTES:
                raise HttpFailure("line too long")
            await self._fill()
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 2]
        return line

    async def _read_exactly(self, n: int) -> bytes:
        while len(self._buffer) < n:
            await self._fill()
        data = bytes(self._buffer[:n])
        del self._buffer[:n]
        return data

    async def _read_head(self) -> tuple[int, dict[str, str]]:
        while (end := self._buffer.find(b"\r\n\r\n")) < 0:
            if len(self._buffer) > MAX_HEADER_BYTES:
                raise HttpFailure("response headers too long")
            await self._fill()
        lines = bytes(self._buffer[:end]).decode("latin-1").split("\r\n")
        del self._buffer[: end + 4]
        status = int(lines[0].split(" ", 2)[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    async def _next_chunk(self) -> bytes:
        """One chunk's data; b"" for the last chunk (no trailers: the server sends none)."""
        size = int((await self._read_line()).split(b";")[0], 16)
        data = await self._read_exactly(size)
        await self._read_line()
        return data

    async def _read_chunked(self) -> bytes:
        body = bytearray()
        while chunk := await self._next_chunk():  # the last, empty chunk takes the final CRLF with it
            body += chunk
        return bytes(body)

    async def _read_events(
        self, reply: Reply, chunked: bool, on_message: Callable[[dict[str, Any]], bool] | None
    ) -> None:
        pending = bytearray()
        ended = False
        while not ended:
            chunk = await self._next_chunk() if chunked else await self._read_some()
            if not chunk:
                break
            pending += chunk.replace(b"\r\n", b"\n")
            while (end := pending.find(b"\n\n")) >= 0:
                event = bytes(pending[:end])
                del pending[: end + 2]
                for line in event.split(b"\n"):
                    if line.startswith(b"data:"):
                        message = json.loads(line[5:])
                        reply.messages.append(message)
                        if on_message is not None and on_message(message):
                            ended = True
        if chunked and ended:  # the server closes the stream after the response: drain to its last chunk
            while await self._next_chunk():
                pass

    async def _read_some(self) -> bytes:
        if not self._buffer:
            try:
                await self._fill()
            except HttpFailure:
                return b""
        data = bytes(self._buffer)
        self._buffer.clear()
        return data
