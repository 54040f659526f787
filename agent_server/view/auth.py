"""Who may use the page, and how a browser proves it (see the README's "Web view" section).

- **No `auth` (a loopback bind only):** the server prints a login link on stderr, as Jupyter does:
  `http://127.0.0.1:8765/view/?token=<one-time token>`. Opening it exchanges the token (once: it is then
  spent, and a fresh link is printed for another browser) for a cookie, and the page drops the token from
  the address bar. The principal is `local`, the one of stdio and of unauthenticated loopback HTTP.
- **With `auth` (any bind):** the page asks for a bearer token of the HTTP transport (the same `auth.tokens`
  or JWTs as `/mcp`), and the principal is the token's: the page shows that principal's sessions and
  questions only. A script may send `Authorization: Bearer <token>` on each request instead of a cookie.

The cookie (`HttpOnly`, `SameSite=Strict`, `Secure` over HTTPS, path of the page) holds no token: it is the
principal and an expiry signed with HMAC-SHA256 under the page key (the first `request_state_keys` entry when
set, shared by replicas; else a key of this process). Every state-changing request must carry the CSRF token
that `/api/me` gives (the HMAC of the cookie under another label) in `X-CSRF-Token`, as JSON, with an Origin
of the page's own host.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from agent_server.types import LOCAL_PRINCIPAL, principal_problem

COOKIE = "agent_server_view"
SESSION_S = 12 * 3600
"""How long a login lasts."""
MAX_LOGIN_TOKENS = 8
"""Unspent login links kept at once (the oldest is forgotten first)."""

BearerVerifier = Callable[[str], Awaitable[str | None]]
"""A bearer token -> its principal, or None when it is not valid (the HTTP transport's verifier)."""


@dataclass
class PageAuth:
    """See the module docstring. `verify` is None without `auth`: then login links (`new_link_token`)."""

    key: bytes
    verify: BearerVerifier | None = None
    on_spent: Callable[[], None] | None = None
    """Called when a login link was used (the server then prints a fresh one)."""
    _links: list[str] = field(default_factory=list[str])

    @property
    def uses_links(self) -> bool:
        return self.verify is None

    def new_link_token(self) -> str:
        token = secrets.token_urlsafe(24)
        self._links = [*self._links[-(MAX_LOGIN_TOKENS - 1) :], _digest(token)]
        return token

    def spend_link_token(self, token: str) -> str | None:
        """The cookie for a login link's token (spent now), or None when it is not an unspent one."""
        if not self.uses_links:
            return None
        digest = _digest(token)
        for kept in self._links:
            if hmac.compare_digest(kept, digest):
                self._links.remove(kept)
                if self.on_spent is not None:
                    self.on_spent()
                return self.cookie_for(LOCAL_PRINCIPAL)
        return None

    async def login(self, bearer: str) -> str | None:
        """The cookie for a valid bearer token, or None."""
        principal = await self.bearer_principal(bearer)
        return None if principal is None else self.cookie_for(principal)

    async def bearer_principal(self, bearer: str) -> str | None:
        if self.verify is None or not bearer or len(bearer) > 8192:
            return None
        return await self.verify(bearer)

    def cookie_for(self, principal: str, now: float | None = None) -> str:
        expires = int((time.time() if now is None else now) + SESSION_S)
        body = _b64(f"{expires}:{principal}".encode())
        return f"{body}.{self._sign('session', body)}"

    def principal_of(self, cookie: str | None, now: float | None = None) -> str | None:
        """The principal a cookie stands for, or None when it is not one this key signed, or has expired."""
        if not cookie or cookie.count(".") != 1 or len(cookie) > 2048:
            return None
        body, signature = cookie.split(".")
        if not hmac.compare_digest(signature, self._sign("session", body)):
            return None
        try:
            expires, principal = base64.urlsafe_b64decode(body + "==").decode().split(":", 1)
            alive = int(expires) > (time.time() if now is None else now)
        except (ValueError, UnicodeDecodeError):
            return None
        return principal if alive and principal_problem(principal) is None else None

    def csrf_for(self, cookie: str) -> str:
        return self._sign("csrf", cookie)

    def csrf_ok(self, cookie: str, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(token, self.csrf_for(cookie))

    def _sign(self, label: str, value: str) -> str:
        return _b64(hmac.new(self.key, f"{label}:{value}".encode(), hashlib.sha256).digest())


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def page_key(request_state_keys: list[str]) -> bytes:
    """The key that signs the page's cookies: derived from the first shared key (replicas agree), else random."""
    if request_state_keys:
        return hmac.new(request_state_keys[0].encode(), b"agent-server view cookie", hashlib.sha256).digest()
    return secrets.token_bytes(32)
