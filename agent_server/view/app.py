"""The web view's ASGI app: a static page with its own script, a small JSON API, and a stream of changes.

Routes, under the page's path (`/view` by default):

- `GET /`: the page (or its login page); `GET /?token=...` spends a login link (`auth.PageAuth`).
- `POST /login`: `{"token": "<bearer token>"}` with `auth` set: sets the cookie.
- `GET /static/view.js`, `/static/view.css`: the page's script and style (no CDN, no fonts: it works offline).
- `GET /api/me`: the principal and the CSRF token.
- `GET /api/sessions`, `/api/sessions/{id}/turns`, `/api/sessions/{id}/turns/{turn}` (the timeline),
  `/api/sessions/{id}/turns/{turn}/record` (the whole stored record, escaped and capped).
- `GET /api/approvals`; `POST /api/approvals/{question}` `{"choice": "allow_once"|"allow_session"|"deny"}`.
- `GET /api/live`: server-sent events: `turn` (an event of a turn of this process, as it happens) and
  `changed` (the sessions or the pending questions changed, seen in the store every `POLL_S`).

Every response: Host and Origin checked as the HTTP transport checks them, a strict Content-Security-Policy
(nothing but this origin's own script, style and requests; no inline script or style, no frames), `nosniff`,
no referrer, no caching. Every state-changing request: an authenticated principal, JSON, the CSRF token, and an
Origin (when the browser sends one, which it does for these) of this very host.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib.resources import files
from typing import TYPE_CHECKING, Any, cast

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from agent_server.errors import AgentServerError, StoreError
from agent_server.events import AgentEvent
from agent_server.types import PendingApproval, TurnRecord
from agent_server.view import timeline
from agent_server.view.auth import COOKIE, SESSION_S, PageAuth

if TYPE_CHECKING:
    from agent_server.runtime import AgentRuntime

logger = logging.getLogger(__name__)

POLL_S = 1.0
"""How often the stream of changes looks at the store (sessions, pending questions)."""
PING_S = 15.0
EVENTS_PER_BATCH = 256
SESSIONS_LISTED = 100
TURNS_LISTED = 100
MAX_BODY = 16 * 1024
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
_STATIC = {
    "view.js": "text/javascript; charset=utf-8",
    "view.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}

RuntimeOf = Callable[[], "AgentRuntime"]
Handler = Callable[[Request], Awaitable[Response]]


def view_app(runtime_of: RuntimeOf, *, auth: PageAuth, security: TransportSecuritySettings) -> Starlette:
    """The page's app, to mount at the page's path: `runtime_of()` is the runtime it reads (and acts for a
    request's principal through `as_principal`)."""
    page = _Page(runtime_of, auth, TransportSecurityMiddleware(security))
    routes = [
        Route("/", page.guarded(page.index), methods=["GET"]),
        Route("/login", page.guarded(page.login, post=True), methods=["POST"]),
        Route("/logout", page.guarded(page.logout, post=True), methods=["POST"]),
        Route("/static/{name}", page.guarded(page.static), methods=["GET"]),
        Route("/api/me", page.guarded(page.me), methods=["GET"]),
        Route("/api/sessions", page.guarded(page.sessions), methods=["GET"]),
        Route("/api/sessions/{session_id}/turns", page.guarded(page.turns), methods=["GET"]),
        Route("/api/sessions/{session_id}/turns/{turn_id}", page.guarded(page.turn), methods=["GET"]),
        Route("/api/sessions/{session_id}/turns/{turn_id}/record", page.guarded(page.record), methods=["GET"]),
        Route("/api/approvals", page.guarded(page.approvals), methods=["GET"]),
        Route("/api/approvals/{question_id}", page.guarded(page.answer, post=True), methods=["POST"]),
        Route("/api/live", page.guarded(page.live), methods=["GET"]),
    ]
    return Starlette(routes=routes)


def _asset(name: str) -> bytes:
    return files("agent_server.view").joinpath("static", name).read_bytes()


class _Page:
    def __init__(self, runtime_of: RuntimeOf, auth: PageAuth, checks: TransportSecurityMiddleware) -> None:
        self._runtime_of = runtime_of
        self._auth = auth
        self._checks = checks

    # --- the checks every request passes ------------------------------------------------------

    def guarded(self, handler: Handler, *, post: bool = False) -> Handler:
        async def endpoint(request: Request) -> Response:
            refused = await self._checks.validate_request(request, is_post=post)
            if refused is None and post:
                refused = _same_origin(request)
            if refused is None:
                try:
                    response = await handler(request)
                except AgentServerError as exc:
                    response = _json({"error": exc.message}, _status_of(exc))
            else:
                response = refused
            response.headers.update(HEADERS)
            return response

        return endpoint

    async def _principal(self, request: Request) -> str | None:
        bearer = request.headers.get("authorization", "")
        if bearer.lower().startswith("bearer "):
            return await self._auth.bearer_principal(bearer[7:].strip())
        return self._auth.principal_of(request.cookies.get(COOKIE))

    async def _runtime(self, request: Request) -> AgentRuntime | None:
        principal = await self._principal(request)
        return None if principal is None else self._runtime_of().as_principal(principal)

    async def _acting(self, request: Request) -> AgentRuntime | Response:
        """The runtime for a state-changing request: authenticated, and with the CSRF token for a cookie."""
        if request.headers.get("authorization", "").lower().startswith("bearer "):
            runtime = await self._runtime(request)
            return runtime if runtime is not None else _json({"error": "not logged in"}, 401)
        cookie = request.cookies.get(COOKIE)
        principal = self._auth.principal_of(cookie)
        if principal is None or cookie is None:
            return _json({"error": "not logged in"}, 401)
        if not self._auth.csrf_ok(cookie, request.headers.get("x-csrf-token")):
            return _json({"error": "missing or wrong CSRF token"}, 403)
        return self._runtime_of().as_principal(principal)

    # --- the page -----------------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        token = request.query_params.get("token")
        if token is not None:
            cookie = self._auth.spend_link_token(token)
            if cookie is None:
                return _html("login.html", 403)
            response = RedirectResponse(_base(request) + "/", status_code=303)
            self._set_cookie(request, response, cookie)
            return response
        if await self._principal(request) is None:
            return _html("login.html", 401)
        return _html("index.html")

    async def login(self, request: Request) -> Response:
        body = await _body(request)
        bearer = body.get("token")
        cookie = await self._auth.login(bearer) if isinstance(bearer, str) else None
        if cookie is None:
            return _json({"error": "that token is not valid here"}, 401)
        response = _json({"ok": True})
        self._set_cookie(request, response, cookie)
        return response

    async def logout(self, request: Request) -> Response:
        response = _json({"ok": True})
        response.delete_cookie(COOKIE, path=_base(request) + "/")
        return response

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _STATIC:
            return Response("not found", 404)
        return Response(_asset(name), media_type=_STATIC[name])

    def _set_cookie(self, request: Request, response: Response, cookie: str) -> None:
        response.set_cookie(
            COOKIE,
            cookie,
            max_age=SESSION_S,
            path=_base(request) + "/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )

    # --- reading ------------------------------------------------------------------------------

    async def me(self, request: Request) -> Response:
        principal = await self._principal(request)
        login = "link" if self._auth.uses_links else "token"
        if principal is None:
            return _json({"error": "not logged in", "login": login}, 401)
        cookie = request.cookies.get(COOKIE)
        csrf = self._auth.csrf_for(cookie) if cookie is not None else None
        return _json({"principal": principal, "csrf": csrf, "login": login})

    async def sessions(self, request: Request) -> Response:
        runtime = await self._runtime(request)
        if runtime is None:
            return _json({"error": "not logged in"}, 401)
        cursor = request.query_params.get("cursor") or None
        listed, next_cursor = await runtime.list_sessions(cursor=cursor, limit=SESSIONS_LISTED, connection=None)
        return _json({"sessions": [timeline.session_item(s) for s in listed], "next_cursor": next_cursor})

    async def turns(self, request: Request) -> Response:
        runtime = await self._runtime(request)
        if runtime is None:
            return _json({"error": "not logged in"}, 401)
        session_id = request.path_params["session_id"]
        session = await runtime.get_session(session_id, connection=None)
        cursor = request.query_params.get("cursor") or None
        turns, next_cursor = await runtime.list_turns(session_id, cursor=cursor, limit=TURNS_LISTED)
        return _json(
            {
                "session": timeline.session_item(session),
                "turns": [timeline.turn_item(t) for t in turns],
                "next_cursor": next_cursor,
            }
        )

    async def turn(self, request: Request) -> Response:
        runtime = await self._runtime(request)
        if runtime is None:
            return _json({"error": "not logged in"}, 401)
        record = await self._record(runtime, request)
        return _json(timeline.timeline(record))

    async def record(self, request: Request) -> Response:
        runtime = await self._runtime(request)
        if runtime is None:
            return _json({"error": "not logged in"}, 401)
        return _json(timeline.record_text(await self._record(runtime, request)))

    async def _record(self, runtime: AgentRuntime, request: Request) -> TurnRecord:
        session_id, turn_id = request.path_params["session_id"], request.path_params["turn_id"]
        stored = await runtime.get_turn(session_id, turn_id)  # with its progress so far, while it runs
        background = runtime.background_turn(turn_id)
        if background is None or background.done or background.record.status == stored.status:
            return stored
        return stored.model_copy(update={"status": background.record.status})  # e.g. awaiting_input

    async def approvals(self, request: Request) -> Response:
        runtime = await self._runtime(request)
        if runtime is None:
            return _json({"error": "not logged in"}, 401)
        return _json({"approvals": [_question(q) for q in await runtime.pending_approvals()]})

    # --- answering ----------------------------------------------------------------------------

    async def answer(self, request: Request) -> Response:
        acting = await self._acting(request)
        if isinstance(acting, Response):
            return acting
        body = await _body(request)
        choice = body.get("choice")
        if not isinstance(choice, str):
            return _json({"error": 'expected {"choice": "allow_once" | "allow_session" | "deny"}'}, 400)
        question_id = request.path_params["question_id"]
        if not await acting.answer_approval(question_id, choice):
            return _json({"error": "that question is no longer waiting (answered, expired or gone)"}, 409)
        logger.info("the web view answered %s: %s", question_id, choice)
        return _json({"answered": True, "choice": choice})

    # --- live ---------------------------------------------------------------------------------

    async def live(self, request: Request) -> Response:
        runtime = await self._runtime(request)
        if runtime is None:
            return _json({"error": "not logged in"}, 401)
        if not runtime.can_watch_turns():
            return _json({"error": "too many pages watch this server's turns"}, 503)
        return StreamingResponse(_changes(runtime), media_type="text/event-stream")


async def _changes(runtime: AgentRuntime) -> AsyncIterator[str]:
    """The page's stream: this process's turn events as they happen, and a `changed` when the store's sessions or
    pending questions differ from the last look (every `POLL_S`), with a comment line every `PING_S`.

    Nothing is yielded inside a cancel scope (the consumer's writes are never cut by this loop's timeouts)."""
    with runtime.watch_turns() as watch:
        seen: str | None = None
        next_look = anyio.current_time()
        last_sent = anyio.current_time()
        yield "retry: 2000\n\n"
        while True:
            batch = await _next_events(watch.events, next_look)
            for event in batch:
                yield f"event: turn\ndata: {event.model_dump_json()}\n\n"
            if batch:
                last_sent = anyio.current_time()
            if anyio.current_time() >= next_look:
                next_look = anyio.current_time() + POLL_S
                now = await _signature(runtime)
                if now != seen or watch.lost:
                    lost, watch.lost = watch.lost, 0
                    yield f"event: changed\ndata: {json.dumps({'lost': lost})}\n\n"
                    seen, last_sent = now, anyio.current_time()
            if anyio.current_time() - last_sent >= PING_S:
                yield ": ping\n\n"
                last_sent = anyio.current_time()


async def _next_events(events: MemoryObjectReceiveStream[AgentEvent], until: float) -> list[AgentEvent]:
    """The events that arrive before `until` (anyio's clock): the first one waited for, then those already there."""
    batch: list[AgentEvent] = []
    with anyio.move_on_after(max(0.0, until - anyio.current_time())):
        batch.append(await events.receive())
    while len(batch) < EVENTS_PER_BATCH:
        try:
            batch.append(events.receive_nowait())
        except anyio.WouldBlock:
            break
    return batch


async def _signature(runtime: AgentRuntime) -> str:
    try:
        sessions, _ = await runtime.list_sessions(limit=SESSIONS_LISTED, connection=None)
        questions = await runtime.pending_approvals()
    except AgentServerError as exc:
        return f"error: {exc.message}"
    parts = [f"{s.session_id}:{s.updated_at}:{s.turn_count}" for s in sessions]
    return "|".join([*parts, *(q.question_id for q in questions)])


def _question(question: PendingApproval) -> dict[str, Any]:
    data: dict[str, Any] = question.model_dump(exclude={"principal", "message"})
    data["tool"] = timeline.shown(question.tool, 200)
    data["source"] = timeline.shown(question.source, 200)
    data["shown"] = {"text": question.shown, "hidden": question.hidden_chars}  # escaped by `present_call`
    if question.warning is not None:
        data["warning"] = timeline.shown(question.warning, 2000)
    return data


def _status_of(exc: AgentServerError) -> int:
    if isinstance(exc, StoreError):
        return 503
    return 404 if exc.type.endswith("not_found") else 400


def _same_origin(request: Request) -> Response | None:
    """A state-changing request from a page of another site is refused (with the cookie's SameSite=Strict
    and the CSRF token, a third lock)."""
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return _json({"error": "cross-site request refused"}, 403)
    origin = request.headers.get("origin")
    if origin is not None and origin.split("://", 1)[-1] != request.headers.get("host"):
        return _json({"error": "cross-origin request refused"}, 403)
    return None


async def _body(request: Request) -> dict[str, object]:
    """The request's JSON object (at most `MAX_BODY` bytes); empty when it is none."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            return {}
        chunks.append(chunk)
    try:
        data: object = json.loads(b"".join(chunks) or b"null")
    except ValueError:
        return {}
    return cast(dict[str, object], data) if isinstance(data, dict) else {}


def _base(request: Request) -> str:
    return request.scope.get("root_path", "").rstrip("/")


def _html(name: str, status: int = 200) -> Response:
    return Response(_asset(name), status_code=status, media_type="text/html; charset=utf-8")


def _json(data: Any, status: int = 200) -> Response:
    return JSONResponse(data, status_code=status)
