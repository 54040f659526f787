"""The web view beside `/mcp` (`view.enabled`, `server/http_app.py`): behind the door's own bearer tokens, with a
login form, over the server's runtime; and with a login link on a loopback bind without `auth`."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from agent_server.http_settings import AuthSettings
from agent_server.llm.scripted import ScriptedLLM
from agent_server.server.app import create_server
from agent_server.server.http_app import http_app
from agent_server.view.settings import ViewSettings
from tests.interaction.harness import make_settings

BASE = "http://127.0.0.1:8000"
JSON = {"Content-Type": "application/json", "Origin": BASE}


def digest(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


def test_with_auth_the_page_logs_in_with_a_bearer_token_of_the_door(tmp_path: Path) -> None:
    auth = AuthSettings(tokens={"alice": digest("alice-token")})
    settings = make_settings(tmp_path, auth=auth, view=ViewSettings(enabled=True))
    app = http_app(create_server(settings, llm=ScriptedLLM([])), settings, host="127.0.0.1", port=8000)
    with TestClient(app, base_url=BASE) as client:
        assert client.post("/mcp", json={}).status_code == 401  # the door stays locked
        login_page = client.get("/view/")
        assert login_page.status_code == 401 and 'id="login-token"' in login_page.text
        assert client.get("/view/api/me").json()["login"] == "token"
        assert client.post("/view/login", content='{"token": "bob-token"}', headers=JSON).status_code == 401
        assert client.post("/view/login", content='{"token": "alice-token"}', headers=JSON).status_code == 200
        assert client.get("/view/api/me").json()["principal"] == "alice"
        assert client.get("/view/api/sessions").json() == {"sessions": [], "next_cursor": None}
        assert client.get("/view/").status_code == 200


def test_without_auth_a_loopback_page_opens_with_the_link_it_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = make_settings(tmp_path, view=ViewSettings(enabled=True, path="/agent/view"))
    app = http_app(create_server(settings, llm=ScriptedLLM([])), settings, host="127.0.0.1", port=8000)
    link = re.search(r"(http://127\.0\.0\.1:8000/agent/view/\?token=\S+)", capsys.readouterr().err)
    assert link is not None
    with TestClient(app, base_url=BASE) as client:
        assert client.get("/agent/view/api/sessions").status_code == 401
        assert client.get(link.group(1).removeprefix(BASE)).status_code == 200  # redirected to the page
        assert client.get("/agent/view/api/me").json()["principal"] == "local"


def test_the_page_is_not_served_unless_enabled(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    app = http_app(create_server(settings, llm=ScriptedLLM([])), settings, host="127.0.0.1", port=8000)
    with TestClient(app, base_url=BASE) as client:
        assert client.get("/view/").status_code == 404
