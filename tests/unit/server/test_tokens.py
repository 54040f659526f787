"""The bearer-token verifiers: static SHA-256 digests and JWTs against a local JWKS served over real HTTP."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import anyio
import jwt
import pytest
from pydantic import ValidationError

from agent_server.http_settings import AuthSettings, JwtSettings
from agent_server.server.tokens import MAX_TOKEN_CHARS, JwtTokens, StaticTokens, Tokens
from tests.fakes.jwks import AUDIENCE, ISSUER, SigningKey, jwks_server, key_set

pytestmark = pytest.mark.anyio


def digest(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


# --- static tokens ------------------------------------------------------------------------------


async def test_a_static_token_is_its_principals_and_nothing_else_is_anyones() -> None:
    tokens = StaticTokens({"alice": digest("a-token"), "bob": digest("b-token")})
    alice = await tokens.verify_token("a-token")
    assert alice is not None and (alice.subject, alice.client_id) == ("alice", "alice")
    assert alice.token == ""  # the token itself is not kept
    bob = await tokens.verify_token("b-token")
    assert bob is not None and bob.subject == "bob"
    for wrong in ("", "a-token ", "A-TOKEN", "b-toke", digest("a-token"), "a" * (MAX_TOKEN_CHARS + 1)):
        assert await tokens.verify_token(wrong) is None


def test_the_settings_take_digests_never_tokens(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="never the token itself"):
        AuthSettings(tokens={"alice": "a-plain-token"})
    with pytest.raises(ValidationError, match="the same token"):
        AuthSettings(tokens={"alice": digest("x"), "bob": digest("x")})
    with pytest.raises(ValidationError, match="principal"):
        AuthSettings(tokens={"bad\nname": digest("x")})
    with pytest.raises(ValidationError, match="auth needs tokens"):
        AuthSettings()
    upper = AuthSettings(tokens={"alice": digest("x").upper().replace("SHA256", "sha256")})
    assert upper.tokens == {"alice": digest("x")}
    assert "sha256" not in repr(upper)  # digests stay out of reprs and logs


def test_a_tokens_file_adds_its_principals(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"bob": digest("b")}))
    auth = AuthSettings(tokens={"alice": digest("a")}, tokens_file=path)
    assert auth.tokens == {"alice": digest("a"), "bob": digest("b")}
    path.write_text(json.dumps({"alice": digest("c")}))
    with pytest.raises(ValidationError, match="both auth.tokens and"):
        AuthSettings(tokens={"alice": digest("a")}, tokens_file=path)
    path.write_text("[1, 2]")
    with pytest.raises(ValidationError, match="must hold one object"):
        AuthSettings(tokens_file=path)
    with pytest.raises(ValidationError, match="cannot read"):
        AuthSettings(tokens_file=tmp_path / "missing.json")


# --- JWTs ---------------------------------------------------------------------------------------


def _jwt_settings(url: str, **overrides: Any) -> JwtSettings:
    return JwtSettings.model_validate(
        {"issuer": ISSUER, "jwks_url": url, "audience": AUDIENCE, "jwks_refresh_min_s": 0, **overrides}
    )


async def test_a_jwt_of_the_issuer_for_this_audience_is_its_subjects() -> None:
    key = SigningKey("k1")
    with anyio.fail_after(10):
        async with jwks_server(key_set(key)) as server:
            tokens = JwtTokens(_jwt_settings(server.url))
            verified = await tokens.verify_token(key.token("alice", azp="the-client", scope="mcp read"))
            again = await tokens.verify_token(key.token("bob"))
    assert verified is not None
    assert (verified.subject, verified.client_id, verified.scopes) == ("alice", "the-client", ["mcp", "read"])
    assert verified.claims == {"iss": ISSUER} and verified.resource == AUDIENCE
    assert again is not None and again.subject == "bob"
    assert server.requests == 1  # the key set is cached


@pytest.mark.parametrize(
    "claims",
    [
        {"aud": "http://elsewhere.example/mcp"},
        {"iss": "https://another-issuer.example"},
        {"lifetime_s": -120},  # expired (beyond the 30 s leeway)
        {"lifetime_s": None, "exp": None},  # no exp
        {"sub": None},
        {"sub": "local"},  # the local principal is nobody's to claim
        {"nbf": 4_000_000_000},
    ],
)
async def test_a_jwt_that_does_not_hold_up_is_refused(claims: dict[str, Any]) -> None:
    key = SigningKey("k1")
    subject = claims.pop("sub", "alice")
    lifetime = claims.pop("lifetime_s", 300)
    with anyio.fail_after(10):
        async with jwks_server(key_set(key)) as server:
            tokens = JwtTokens(_jwt_settings(server.url))
            token = key.token(subject, lifetime_s=lifetime or 0, **claims) if subject else _without_sub(key)
            assert await tokens.verify_token(token) is None


def _without_sub(key: SigningKey) -> str:
    body = jwt.decode(key.token("x"), options={"verify_signature": False})
    del body["sub"]
    return jwt.encode(body, key.private, algorithm="ES256", headers={"kid": key.kid})


async def test_a_jwt_signed_otherwise_than_by_the_issuers_keys_is_refused() -> None:
    key, stranger = SigningKey("k1"), SigningKey("k1")  # same kid, another key
    public_pem = key.jwk()["x"].encode()
    with anyio.fail_after(10):
        async with jwks_server(key_set(key)) as server:
            tokens = JwtTokens(_jwt_settings(server.url))
            assert await tokens.verify_token(stranger.token()) is None
            claims = jwt.decode(key.token(), options={"verify_signature": False})
            hmac_token = jwt.encode(claims, public_pem, algorithm="HS256", headers={"kid": "k1"})
            assert await tokens.verify_token(hmac_token) is None  # no symmetric algorithm, ever
            unsigned = jwt.encode(claims, None, algorithm="none", headers={"kid": "k1"})
            assert await tokens.verify_token(unsigned) is None
            assert await tokens.verify_token("not.a.jwt") is None


async def test_a_rotated_key_is_fetched_once_and_made_up_key_ids_do_not_make_it_fetch_again() -> None:
    old, new = SigningKey("k1"), SigningKey("k2")
    with anyio.fail_after(10):
        async with jwks_server(key_set(old)) as server:
            tokens = JwtTokens(_jwt_settings(server.url, jwks_refresh_min_s=3600))
            eager = JwtTokens(_jwt_settings(server.url, jwks_refresh_min_s=0))
            assert await tokens.verify_token(old.token()) is not None
            assert await eager.verify_token(old.token()) is not None
            server.body = key_set(old, new)  # the issuer rotates its keys
            assert await tokens.verify_token(new.token()) is None  # fetched less than jwks_refresh_min_s ago
            assert server.requests == 2
            assert await eager.verify_token(new.token()) is not None  # an unknown kid fetches again
            for made_up in ("k3", "k4", "k5"):
                assert await tokens.verify_token(SigningKey(made_up).token()) is None
    assert server.requests == 3  # the made-up kids fetched nothing


async def test_the_key_set_fetch_is_bounded_in_size_and_time(caplog: pytest.LogCaptureFixture) -> None:
    key = SigningKey("k1")
    caplog.set_level(logging.WARNING, logger="agent_server.server.tokens")
    with anyio.fail_after(20):
        async with jwks_server(key_set(key)) as server:
            server.body = b'{"keys": [' + b" " * 5000 + key_set(key)[10:]
            small = JwtTokens(_jwt_settings(server.url, jwks_max_bytes=4096))
            assert await small.verify_token(key.token()) is None
            server.content_length = 1_000_000_000  # says so before sending it
            assert await small.verify_token(key.token()) is None
            server.content_length, server.stall = None, True
            stalled = JwtTokens(_jwt_settings(server.url, jwks_timeout_s=0.3))
            assert await stalled.verify_token(key.token()) is None
    messages = [r.getMessage() for r in caplog.records]
    assert sum("larger than jwks_max_bytes=4096" in m for m in messages) == 2
    assert any("no answer within jwks_timeout_s=0.3" in m for m in messages)


async def test_static_tokens_and_jwts_together() -> None:
    key = SigningKey("k1")
    with anyio.fail_after(10):
        async with jwks_server(key_set(key)) as server:
            auth = AuthSettings(tokens={"ci": digest("ci-token")}, jwt=_jwt_settings(server.url))
            tokens = Tokens(auth)
            static = await tokens.verify_token("ci-token")
            signed = await tokens.verify_token(key.token("alice"))
            assert await tokens.verify_token("neither") is None
    assert static is not None and static.subject == "ci"
    assert signed is not None and signed.subject == "alice"
