"""The page's login (`agent_server.view.auth`): one-time links, signed cookies that expire, CSRF tokens."""

from __future__ import annotations

import pytest

from agent_server.view.auth import SESSION_S, PageAuth, page_key

pytestmark = pytest.mark.anyio


def test_a_login_link_works_once_and_asks_for_a_fresh_one() -> None:
    spent: list[bool] = []
    auth = PageAuth(page_key([]), on_spent=lambda: spent.append(True))
    token = auth.new_link_token()
    cookie = auth.spend_link_token(token)
    assert cookie is not None and auth.principal_of(cookie) == "local"
    assert auth.spend_link_token(token) is None  # spent
    assert auth.spend_link_token("guessed") is None
    assert spent == [True]


def test_a_cookie_is_the_keys_own_unaltered_and_unexpired() -> None:
    auth = PageAuth(page_key([]))
    cookie = auth.cookie_for("alice", now=1000.0)
    assert auth.principal_of(cookie, now=1000.0 + SESSION_S - 1) == "alice"
    assert auth.principal_of(cookie, now=1000.0 + SESSION_S + 1) is None
    assert PageAuth(page_key([])).principal_of(cookie, now=1000.0) is None  # another process's random key
    body, signature = cookie.split(".")
    forged = PageAuth.cookie_for(auth, "bob", now=1000.0).split(".")[0] + "." + signature
    assert auth.principal_of(forged, now=1000.0) is None
    assert auth.principal_of(None) is None and auth.principal_of("x.y.z") is None


def test_replicas_sharing_request_state_keys_accept_each_others_cookies() -> None:
    key = "k" * 40
    cookie = PageAuth(page_key([key])).cookie_for("alice")
    assert PageAuth(page_key([key])).principal_of(cookie) == "alice"


def test_the_csrf_token_belongs_to_its_cookie() -> None:
    auth = PageAuth(page_key([]))
    one, two = auth.cookie_for("alice"), auth.cookie_for("bob")
    assert auth.csrf_ok(one, auth.csrf_for(one))
    assert not auth.csrf_ok(one, auth.csrf_for(two))
    assert not auth.csrf_ok(one, None)


async def test_with_bearer_tokens_there_are_no_links_and_a_valid_token_logs_in() -> None:
    async def verify(token: str) -> str | None:
        return "alice" if token == "secret" else None

    auth = PageAuth(page_key([]), verify=verify)
    assert not auth.uses_links and auth.spend_link_token(auth.new_link_token()) is None
    cookie = await auth.login("secret")
    assert cookie is not None and auth.principal_of(cookie) == "alice"
    assert await auth.login("wrong") is None
