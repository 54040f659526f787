"""A local JWKS for the tests: signing keys made in the test, and a small HTTP server that serves their key set.

The server answers every GET with the current `body` (or stalls, or lies about its size, as a test asks) and
counts the requests, so tests can see when the verifier fetched.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import jwt
from cryptography.hazmat.primitives.asymmetric import ec

ISSUER = "https://id.example.test"
AUDIENCE = "http://127.0.0.1:8000/mcp"


@dataclass
class SigningKey:
    """An ES256 key pair made now, and its public JWK."""

    kid: str
    private: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))

    def jwk(self) -> dict[str, Any]:
        public: dict[str, Any] = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self.private.public_key()))
        return {**public, "kid": self.kid, "use": "sig", "alg": "ES256"}

    def token(self, subject: str = "alice", *, lifetime_s: float = 300, **claims: Any) -> str:
        now = int(time.time())
        body: dict[str, Any] = {"iss": ISSUER, "aud": AUDIENCE, "sub": subject, "iat": now, "exp": now + lifetime_s}
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, self.private, algorithm="ES256", headers={"kid": self.kid})


def key_set(*keys: SigningKey) -> bytes:
    return json.dumps({"keys": [key.jwk() for key in keys]}).encode()


@dataclass
class JwksServer:
    """What the server answers: `body` with an honest Content-Length unless `content_length` says otherwise;
    `stall` keeps a request unanswered until the connection closes."""

    body: bytes = b'{"keys": []}'
    content_length: int | None = None
    stall: bool = False
    requests: int = 0
    url: str = ""

    async def _serve(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            received = b""
            while b"\r\n\r\n" not in received:
                chunk = await stream.receive()
                received += chunk
            self.requests += 1
            if self.stall:
                await anyio.sleep_forever()
            length = len(self.body) if self.content_length is None else self.content_length
            head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n"
            await stream.send(head.encode() + b"Connection: close\r\n\r\n" + self.body)


@asynccontextmanager
async def jwks_server(body: bytes) -> AsyncIterator[JwksServer]:
    """Serve a key set on a free loopback port while the block runs."""
    server = JwksServer(body=body)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    server.url = f"http://127.0.0.1:{port}/jwks.json"
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, server._serve)  # pyright: ignore[reportPrivateUsage]
        yield server
        tg.cancel_scope.cancel()
