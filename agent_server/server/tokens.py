"""Bearer-token verifiers for Streamable HTTP (DESIGN 3.10): the MCP SDK's `TokenVerifier`, two ways.

- `StaticTokens`: `auth.tokens` (and `auth.tokens_file`), a principal's name -> its token's SHA-256. A
  presented token is hashed once and compared with every configured digest in constant time (no early exit,
  `hmac.compare_digest`), so neither which principal matched nor how much of a digest did shows in the timing.
  The server keeps no token, only digests.
- `JwtTokens`: `auth.jwt`, JWT access tokens of an OAuth 2.1 authorization server (PyJWT), checked against
  the issuer's key set (`JwksCache`): signature under an allowed asymmetric algorithm, `iss`, `aud`, `exp`
  (required), `nbf`; the principal is `sub`.

Either gives the SDK an `AccessToken` whose `subject` (and `client_id` for static tokens) is the principal
(`principals.token_principal`), or None: the SDK's bearer middleware then answers 401 with `WWW-Authenticate`
before anything else of the request is read. A token longer than `MAX_TOKEN_CHARS` is refused unread.
The verified token itself is not kept in the `AccessToken` (its `token` is empty): nothing after the check
needs it, and nothing can log it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.to_thread
from mcp.server.auth.provider import AccessToken, TokenVerifier

from agent_server.http_settings import RESERVED_SUBJECTS, AuthSettings, JwtSettings
from agent_server.types import principal_problem

if TYPE_CHECKING:
    import jwt

logger = logging.getLogger(__name__)

MAX_TOKEN_CHARS = 16 * 1024


class StaticTokens:
    """`TokenVerifier` of the configured token digests (see the module docstring)."""

    def __init__(self, digests: Mapping[str, str]) -> None:
        self._entries = [(name, bytes.fromhex(digest.removeprefix("sha256:"))) for name, digest in digests.items()]

    def principal(self, token: str) -> str | None:
        if len(token) > MAX_TOKEN_CHARS:
            return None
        presented = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        found: str | None = None
        for name, expected in self._entries:  # every entry, whichever matches: constant time
            if hmac.compare_digest(presented, expected):
                found = name
        return found

    async def verify_token(self, token: str) -> AccessToken | None:
        name = self.principal(token)
        return None if name is None else AccessToken(token="", client_id=name, scopes=[], subject=name)


class JwksError(Exception):
    """The key set could not be fetched or used."""


@dataclass(frozen=True)
class SigningKey:
    key: jwt.PyJWK
    alg: str | None
    """The algorithm the key set declares for the key (`alg`); a token must then use that one."""


class JwksCache:
    """The issuer's signing keys (a JWKS document), fetched without holding the event loop and within bounds.

    Fetched over httpx (async) with one deadline for the whole exchange (`timeout_s`), refused past `max_bytes`
    (by its Content-Length, or as it streams), parsed in a worker thread; kept for `ttl_s`, and fetched again
    early for an unknown `kid` (key rotation) at most once per `refresh_min_s`, so that tokens with made-up key
    ids cannot make the server fetch in a loop. One fetch runs at a time; a failed one keeps the keys there were.
    """

    def __init__(self, url: str, *, timeout_s: float, max_bytes: int, ttl_s: float, refresh_min_s: float) -> None:
        self._url = url
        self._timeout_s = timeout_s
        self._max_bytes = max_bytes
        self._ttl_s = ttl_s
        self._refresh_min_s = refresh_min_s
        self._keys: dict[str | None, SigningKey] = {}
        self._fetched_at = -float("inf")
        self._lock = anyio.Lock()

    async def key(self, kid: str | None) -> SigningKey | None:
        """The signing key `kid` names (None: the only one there is), or None."""
        now = anyio.current_time()
        stale = now - self._fetched_at >= self._ttl_s
        unknown = kid not in self._keys and now - self._fetched_at >= self._refresh_min_s
        if stale or unknown:
            await self._refresh(self._fetched_at)
        return self._keys.get(kid)

    async def _refresh(self, seen: float) -> None:
        async with self._lock:
            if self._fetched_at != seen:  # another call fetched while this one waited
                return
            self._fetched_at = anyio.current_time()  # failures count too: they are retried no sooner
            try:
                self._keys = await anyio.to_thread.run_sync(_signing_keys, await self._fetch())
            except (JwksError, OSError, ValueError) as exc:
                logger.warning("cannot use the JWKS at %s (keeping %d key(s)): %s", self._url, len(self._keys), exc)

    async def _fetch(self) -> bytes:
        import httpx

        body = bytearray()
        try:
            with anyio.fail_after(self._timeout_s):
                async with (
                    httpx.AsyncClient(timeout=self._timeout_s, follow_redirects=False) as client,
                    client.stream("GET", self._url, headers={"Accept": "application/json"}) as response,
                ):
                    if response.status_code != 200:
                        raise JwksError(f"HTTP {response.status_code}")
                    if int(response.headers.get("content-length") or 0) > self._max_bytes:
                        raise JwksError(f"larger than jwks_max_bytes={self._max_bytes}")
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > self._max_bytes:
                            raise JwksError(f"larger than jwks_max_bytes={self._max_bytes}")
        except TimeoutError as exc:
            raise JwksError(f"no answer within jwks_timeout_s={self._timeout_s:g}") from exc
        except httpx.HTTPError as exc:
            raise JwksError(f"{type(exc).__name__}: {exc}") from exc
        return bytes(body)


def _signing_keys(body: bytes) -> dict[str | None, SigningKey]:
    """The key set's public signing keys by `kid` (and under None when there is exactly one); keys for
    encryption, symmetric keys and keys PyJWT cannot use are left out. Blocking: runs in a worker thread."""
    import jwt

    document: object = json.loads(body)
    entries = cast(dict[str, Any], document).get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise JwksError('not a JWK Set (a JSON object with "keys")')
    signing: list[tuple[str | None, SigningKey]] = []
    for entry in cast(list[object], entries):
        if not isinstance(entry, dict):
            continue
        raw = cast(dict[str, Any], entry)
        if raw.get("use", "sig") != "sig" or raw.get("kty") == "oct":
            continue
        try:
            key = jwt.PyJWK(raw)
        except jwt.PyJWTError:
            continue
        declared = raw.get("alg")
        signing.append((key.key_id, SigningKey(key, declared if isinstance(declared, str) else None)))
    if not signing:
        raise JwksError("the JWK Set holds no usable signing key")
    found: dict[str | None, SigningKey] = {kid: key for kid, key in signing if kid is not None}
    if len(signing) == 1:
        found[None] = signing[0][1]
    return found


class JwtTokens:
    """`TokenVerifier` of JWT access tokens (see the module docstring and `JwtSettings`)."""

    def __init__(self, settings: JwtSettings, keys: JwksCache | None = None) -> None:
        self._settings = settings
        self._keys = keys or JwksCache(
            settings.jwks_url,
            timeout_s=settings.jwks_timeout_s,
            max_bytes=settings.jwks_max_bytes,
            ttl_s=settings.jwks_cache_s,
            refresh_min_s=settings.jwks_refresh_min_s,
        )

    async def verify_token(self, token: str) -> AccessToken | None:
        import jwt

        if len(token) > MAX_TOKEN_CHARS:
            return None
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return None
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in self._settings.algorithms or not isinstance(kid, str | None):
            return None
        key = await self._keys.key(kid)
        if key is None or key.alg not in (None, alg):
            return None
        return self._claims(token, key.key, alg)

    def _claims(self, token: str, key: jwt.PyJWK, alg: str) -> AccessToken | None:
        import jwt

        settings = self._settings
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[alg],
                audience=settings.audience,
                issuer=settings.issuer,
                leeway=settings.leeway_s,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError:
            return None
        subject = claims.get("sub")
        if not isinstance(subject, str) or principal_problem(subject) is not None or subject in RESERVED_SUBJECTS:
            return None
        client = claims.get("client_id") or claims.get("azp") or subject
        scope = claims.get("scope")
        return AccessToken(
            token="",
            client_id=client if isinstance(client, str) else subject,
            scopes=scope.split() if isinstance(scope, str) else [],
            # The SDK's middleware refuses a token past `expires_at` again, without leeway: give it the same.
            expires_at=int(claims["exp"] + settings.leeway_s),
            resource=settings.audience,
            subject=subject,
            claims={"iss": settings.issuer},
        )


class Tokens:
    """The verifier of `auth`: its static tokens first, then its JWTs (either may be absent)."""

    def __init__(self, auth: AuthSettings) -> None:
        self._static = StaticTokens(auth.tokens) if auth.tokens else None
        self._jwt = JwtTokens(auth.jwt) if auth.jwt is not None else None

    async def verify_token(self, token: str) -> AccessToken | None:
        verified = None if self._static is None else await self._static.verify_token(token)
        if verified is None and self._jwt is not None:
            verified = await self._jwt.verify_token(token)
        return verified


def verifier(auth: AuthSettings) -> TokenVerifier:
    return Tokens(auth)
