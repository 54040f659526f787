"""The settings of the Streamable HTTP door (DESIGN 3.10): who may call it (`auth`) and how it is served (`http`).

Parts of `agent_server.settings.Settings` (keys `auth` and `http`), in a module of their own: only the HTTP
transport reads them (`agent_server.server.http_app`), and nothing here is imported on the stdio path.
"""

import json
import re
from pathlib import Path
from typing import Literal, Self, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent_server.types import principal_problem

JwtAlgorithm = Literal["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
"""Asymmetric signatures only: the server verifies with the issuer's public keys, and holds no secret."""
TOKEN_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
RESERVED_SUBJECTS = frozenset({"local"})
"""`sub` values a JWT may not have: `local` owns what stdio and unauthenticated loopback make (a static token may
be named so on purpose; an identity provider's subject is nobody's choice here)."""


class JwtSettings(BaseModel):
    """JWT access tokens of an OAuth 2.1 authorization server, checked against its published keys (JWKS).

    A token is accepted when its signature verifies with a key of `jwks_url` (by its `kid`) under one of
    `algorithms`, its `iss` is `issuer`, its `aud` is (or contains) `audience`, and `exp` (required) and `nbf`
    allow now, within `leeway_s`. Its principal is its `sub` (required). The key set is fetched over HTTP(S)
    with a time limit (`jwks_timeout_s`) and a size limit (`jwks_max_bytes`), kept `jwks_cache_s`, and fetched
    again early for a `kid` it does not hold, at most once per `jwks_refresh_min_s`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    issuer: str = Field(min_length=1)
    """The authorization server's issuer identifier, as tokens carry it in `iss` (and as the protected resource
    metadata names it)."""
    jwks_url: str = Field(min_length=1)
    audience: str = Field(min_length=1)
    """This server's resource URL (e.g. `https://agents.example.com/mcp`): the `aud` its tokens must carry."""
    algorithms: tuple[JwtAlgorithm, ...] = Field(default=("RS256", "ES256"), min_length=1)
    leeway_s: float = Field(default=30, ge=0, le=300)
    jwks_timeout_s: float = Field(default=5, gt=0, le=60)
    jwks_max_bytes: int = Field(default=256 * 1024, ge=1024, le=16 * 1024 * 1024)
    jwks_cache_s: float = Field(default=300, gt=0, le=86_400)
    jwks_refresh_min_s: float = Field(default=30, ge=0, le=3600)

    @field_validator("issuer", "jwks_url", "audience")
    @classmethod
    def _check_url(cls, value: str) -> str:
        if not value.startswith(("https://", "http://")):
            raise ValueError(f"expected an http(s):// URL, got {value!r}")
        return value


class AuthSettings(BaseModel):
    """Bearer-token authentication of Streamable HTTP (the server is an OAuth 2.1 resource server).

    Static tokens: `tokens` maps a principal's name to its token's SHA-256 (`"sha256:<64 hex digits>"`, e.g.
    `printf %s "$TOKEN" | sha256sum`), and `tokens_file` names a JSON file holding more of the same map (read at
    start); the server keeps no token itself. JWTs: `jwt` (see `JwtSettings`). Both may be set; names and
    `sub`s are then one namespace (a JWT whose `sub` is `alice` is the principal a static token named `alice` is).
    `resource_url`: this server's URL as clients reach it, named by the protected resource metadata (default:
    `jwt.audience`, else `http://HOST:PORT/mcp` of the bind).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tokens: dict[str, str] = Field(default_factory=dict[str, str], repr=False)
    tokens_file: Path | None = None
    jwt: JwtSettings | None = None
    resource_url: str | None = None

    @field_validator("tokens")
    @classmethod
    def _check_tokens(cls, value: dict[str, str]) -> dict[str, str]:
        return _checked_tokens(value, where="auth.tokens")

    @field_validator("resource_url")
    @classmethod
    def _check_resource_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("https://", "http://")):
            raise ValueError(f"expected an http(s):// URL, got {value!r}")
        return value

    @model_validator(mode="after")
    def _add_tokens_file(self) -> Self:
        if self.tokens_file is not None:
            more = _checked_tokens(_read_tokens_file(self.tokens_file), where=str(self.tokens_file))
            if twice := sorted(set(self.tokens) & set(more)):
                raise ValueError(f"principal {twice[0]!r} is in both auth.tokens and {self.tokens_file}")
            object.__setattr__(self, "tokens", {**self.tokens, **more})
        if not self.tokens and self.jwt is None:
            raise ValueError("auth needs tokens (auth.tokens or auth.tokens_file) or auth.jwt")
        digests = list(self.tokens.values())
        if len(set(digests)) != len(digests):
            raise ValueError("two principals have the same token: give each its own")
        return self


def _checked_tokens(value: dict[str, str], *, where: str) -> dict[str, str]:
    checked: dict[str, str] = {}
    for name, digest in value.items():
        if (problem := principal_problem(name)) is not None:
            raise ValueError(f"{where}: {name!r}: {problem}")
        normal = digest.strip().lower() if isinstance(digest, str) else ""  # pyright: ignore[reportUnnecessaryIsInstance]
        if not TOKEN_DIGEST.fullmatch(normal):
            raise ValueError(
                f'{where}: the token of {name!r} must be given as "sha256:<64 hex digits>", its SHA-256'
                ' (e.g. printf %s "$TOKEN" | sha256sum), never the token itself'
            )
        checked[name] = normal
    return checked


def _read_tokens_file(path: Path) -> dict[str, str]:
    try:
        data: object = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read auth.tokens_file {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise ValueError(f"auth.tokens_file {path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in cast(dict[object, object], data).values()):
        raise ValueError(f'auth.tokens_file {path} must hold one object: {{"<principal>": "sha256:<hex>", ...}}')
    return cast(dict[str, str], data)


class HttpSettings(BaseModel):
    """How Streamable HTTP is served: the Host/Origin checks and the connection bounds (uvicorn).

    On a loopback bind the Host and Origin headers must name a loopback host (DNS-rebinding protection);
    elsewhere they must be among `allowed_hosts` / `allowed_origins` (entries as the headers carry them:
    `agents.example.com`, `agents.example.com:*` for any port, `https://app.example.com`). A request without
    an Origin header (any client that is not a browser) passes the Origin check.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    header_timeout_s: float = Field(default=10, gt=0, le=600)
    """A connection whose request line and headers have not all arrived this long after it opened (or, kept
    alive, after its next request's first byte) is closed."""
    keep_alive_timeout_s: int = Field(default=75, ge=1, le=3600)
    """An idle kept-alive connection is closed after this long (uvicorn's `timeout_keep_alive`). Longer than
    HTTP clients keep idle pooled connections (httpx: 5 s, uvicorn's own default): a server that closes an idle
    connection just as the client sends its next request on it resets that request (the client's `ReadError`)."""
    session_idle_timeout_s: float = Field(default=1800, gt=0, le=86_400)
    """A handshake-era MCP session with no request in flight for this long is closed (its id then answers 404,
    and it no longer counts against `limits.mcp_sessions`)."""
    max_connections: int = Field(default=512, ge=1, le=1_000_000)
    """Connections open at once: a connection past it is closed as it opens, and uvicorn answers requests 503
    at it (`limit_concurrency`)."""
