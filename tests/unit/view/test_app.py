"""The page's HTTP surface (`agent_server.view.app`) in process: login by the link printed on stderr or by a bearer
token, the headers of every response, Host/Origin checks, CSRF on answers, principals kept apart."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from starlette.applications import Starlette

from agent_server.http_settings import HttpSettings
from agent_server.llm.scripted import ScriptedLLM
from agent_server.runtime import AgentRuntime
from agent_server.server.http_app import transport_security
from agent_server.settings import ApprovalSettings, ToolsOptions
from agent_server.view.auth import COOKIE
from agent_server.view.serve import page
from tests.interaction.harness import make_settings
from tests.interaction.test_web_approvals import WRITE, next_question

pytestmark = pytest.mark.anyio

BASE = "http://127.0.0.1:8765"
JSON = {"Content-Type": "application/json", "Origin": BASE}


@asynccontextmanager
async def served(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], verify: Any = None
) -> AsyncIterator[tuple[httpx.AsyncClient, AgentRuntime, str]]:
    """A client of the page over a runtime whose model writes a file (approvals in the web view), and the
    login link the page printed (empty with bearer tokens)."""
    settings = make_settings(tmp_path, tools=ToolsOptions(write=True), approvals=ApprovalSettings(web=True))
    async with AgentRuntime(settings, llm=ScriptedLLM(WRITE)) as runtime:
        security = transport_security("127.0.0.1", HttpSettings())
        mounted = page(lambda: runtime, settings, url=f"{BASE}/view/", security=security, verify=verify)
        printed = capsys.readouterr().err
        found = re.search(r"http://\S+\?token=(\S+)", printed)
        transport = httpx.ASGITransport(app=Starlette(routes=[mounted]))
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
            with anyio.fail_after(20):
                yield client, runtime, found.group(1) if found else ""


async def login(client: httpx.AsyncClient, token: str) -> str:
    response = await client.get(f"/view/?token={token}")
    assert response.status_code == 303 and response.headers["location"] == "/view/"
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/view/" in cookie
    return (await client.get("/view/api/me")).json()["csrf"]


async def test_the_page_opens_with_the_printed_link_once_and_lists_the_sessions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with served(tmp_path, capsys) as (client, runtime, token):
        session = await runtime.create_session(title="<b>mine</b>")
        assert (await client.get("/view/")).status_code == 401  # the login page
        assert (await client.get("/view/api/sessions")).status_code == 401
        await login(client, token)
        page_html = await client.get("/view/")
        assert page_html.status_code == 200 and 'src="static/view.js"' in page_html.text
        listed = (await client.get("/view/api/sessions")).json()["sessions"]
        assert [(s["session_id"], s["title"]["text"]) for s in listed] == [(session.session_id, "<b>mine</b>")]
        assert "another, for another browser" in capsys.readouterr().err  # a fresh link for the next browser
        client.cookies.clear()
        assert (await client.get(f"/view/?token={token}")).status_code == 403  # spent


async def test_every_response_is_locked_down_and_other_hosts_and_origins_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with served(tmp_path, capsys) as (client, _runtime, _token):
        for path in ("/view/", "/view/static/view.js", "/view/api/sessions", "/view/static/nope"):
            headers = (await client.get(path)).headers
            assert "script-src 'self'" in headers["content-security-policy"]
            assert "default-src 'none'" in headers["content-security-policy"]
            assert headers["x-content-type-options"] == "nosniff" and headers["cache-control"] == "no-store"
        assert (await client.get("/view/", headers={"Host": "evil.example"})).status_code == 421
        assert (await client.get("/view/", headers={"Origin": "http://evil.example"})).status_code == 403


async def test_an_answer_needs_the_csrf_token_json_and_the_pages_own_origin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with served(tmp_path, capsys) as (client, runtime, token):
        csrf = await login(client, token)
        handle = await runtime.start_turn("write it")
        question = await next_question(runtime)
        shown = (await client.get("/view/api/approvals")).json()["approvals"]
        assert [q["question_id"] for q in shown] == [question.question_id]
        url = f"/view/api/approvals/{question.question_id}"
        body = '{"choice": "allow_once"}'
        assert (await client.post(url, content=body, headers=JSON)).status_code == 403  # no CSRF token
        wrong = {**JSON, "X-CSRF-Token": "x" + csrf[1:]}
        assert (await client.post(url, content=body, headers=wrong)).status_code == 403
        cross = {**JSON, "X-CSRF-Token": csrf, "Origin": "http://127.0.0.1:9999"}
        assert (await client.post(url, content=body, headers=cross)).status_code == 403
        form = {"Content-Type": "application/x-www-form-urlencoded", "Origin": BASE, "X-CSRF-Token": csrf}
        assert (await client.post(url, content=body, headers=form)).status_code == 400
        assert (await runtime.pending_approvals()) != []  # none of those answered it
        answered = await client.post(url, content=body, headers={**JSON, "X-CSRF-Token": csrf})
        assert answered.status_code == 200 and answered.json() == {"answered": True, "choice": "allow_once"}
        again = await client.post(url, content=body, headers={**JSON, "X-CSRF-Token": csrf})
        assert again.status_code == 409
        record = await handle.wait()
        assert record.status == "completed" and [a.channel for a in record.approvals] == ["web"]
        timeline = (await client.get(f"/view/api/sessions/{record.session_id}/turns/{record.turn_id}")).json()
        assert [s["kind"] for s in timeline["steps"]] == ["model", "tools", "model"]
        assert timeline["steps"][1]["calls"][0]["approval"]["decision"] == "allow_once"
        full = (await client.get(f"/view/api/sessions/{record.session_id}/turns/{record.turn_id}/record")).json()
        assert '"turn_id": "' + record.turn_id in full["text"]
        assert (await client.get("/view/api/sessions/ses_unknown/turns")).status_code == 404


async def test_with_bearer_tokens_each_principal_sees_and_answers_only_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def verify(token: str) -> str | None:
        return {"alice-token": "alice", "local-token": "local"}.get(token)

    async with served(tmp_path, capsys, verify=verify) as (client, runtime, token):
        assert token == ""  # no link: the page asks for a token
        await runtime.start_turn("write it")
        question = await next_question(runtime)  # local's
        bad = await client.post("/view/login", content='{"token": "nope"}', headers=JSON)
        assert bad.status_code == 401
        good = await client.post("/view/login", content='{"token": "alice-token"}', headers=JSON)
        assert good.status_code == 200 and COOKIE in good.headers["set-cookie"]
        me = (await client.get("/view/api/me")).json()
        assert me["principal"] == "alice"
        assert (await client.get("/view/api/sessions")).json()["sessions"] == []
        assert (await client.get("/view/api/approvals")).json()["approvals"] == []
        url = f"/view/api/approvals/{question.question_id}"
        denied = await client.post(url, content='{"choice": "deny"}', headers={**JSON, "X-CSRF-Token": me["csrf"]})
        assert denied.status_code == 409
        client.cookies.clear()
        bearer = {**JSON, "Authorization": "Bearer local-token"}  # a script: the header, no cookie nor CSRF
        assert (await client.post(url, content='{"choice": "deny"}', headers=bearer)).status_code == 200


async def test_the_stream_says_what_changed_and_passes_this_processs_turn_events_on(tmp_path: Path) -> None:
    from agent_server.view.app import _changes  # pyright: ignore[reportPrivateUsage]

    settings = make_settings(tmp_path)
    async with AgentRuntime(settings, llm=ScriptedLLM([{"content": "hello there"}])) as runtime:
        stream = _changes(runtime)
        with anyio.fail_after(10):
            assert await anext(stream) == "retry: 2000\n\n"
            assert (await anext(stream)).startswith("event: changed\n")  # the first look
            async with anyio.create_task_group() as tg:
                tg.start_soon(runtime.run_turn, "hi")
                seen: list[str] = []
                while not any('"type":"done"' in item for item in seen):
                    seen.append(await anext(stream))
            changed = await anext(stream)  # the store's new session and turn, at the next look
        await stream.aclose()
    turn_items = [item for item in seen if item.startswith("event: turn\n")]
    assert '"type":"turn"' in turn_items[0] and any('"delta":"hello' in item for item in turn_items)
    assert changed.startswith("event: changed\n")
