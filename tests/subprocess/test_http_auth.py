"""The HTTP door of a real `agent-server --transport streamable-http` process (DESIGN 3.10): bearer tokens of two
principals over real HTTP, JWTs against a JWKS the test serves, the refusal of an unprotected bind, the
Host/Origin checks, and connections that trickle their headers."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.fakes.jwks import ISSUER, SigningKey, jwks_server, key_set
from tests.subprocess.helpers import MODES, ServerDirs, server_env, wait_listening

pytestmark = pytest.mark.anyio

TOKENS = {"alice": "alice-token-0123456789", "bob": "bob-token-9876543210"}
SCRIPT = [{"content": "alice's answer"}, {"content": "bob's answer"}] * 4
JSON_RPC = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
HELLO = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
"""A request the server answers 200 to without a session: the handshake's first."""


def _digest(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


STATIC = {"auth": {"tokens": {name: _digest(token) for name, token in TOKENS.items()}}}


@dataclass
class Running:
    url: str
    process: anyio.abc.Process


@asynccontextmanager
async def serve(
    dirs: ServerDirs, port: int, config: dict[str, Any], *, host: str = "127.0.0.1"
) -> AsyncIterator[Running]:
    path = dirs.root / "config.json"
    path.write_text(json.dumps(config))
    argv = [*dirs.argv(SCRIPT), "--config", str(path), "--transport", "streamable-http"]
    argv += ["--host", host, "--port", str(port)]
    process = await anyio.open_process(argv, env=server_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with anyio.fail_after(20):
            await wait_listening("127.0.0.1", port)
        yield Running(f"http://127.0.0.1:{port}/mcp", process)
    finally:
        process.terminate()
        with anyio.fail_after(10):
            await process.wait()
        await process.aclose()


@asynccontextmanager
async def client_of(url: str, token: str, mode: str) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(20, read=60))
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        yield client


async def _structured(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert result.structured_content is not None, result.content
    return result.structured_content


async def test_a_request_without_a_good_token_is_401_naming_the_resource_metadata(
    dirs: ServerDirs, free_tcp_port: int
) -> None:
    async with serve(dirs, free_tcp_port, STATIC) as server, httpx.AsyncClient() as http:
        with anyio.fail_after(10):
            missing = await http.post(server.url, json=TOOLS_LIST, headers=JSON_RPC)
            wrong = await http.post(server.url, json=TOOLS_LIST, headers={**JSON_RPC, "Authorization": "Bearer nope"})
            basic = await http.post(server.url, json=TOOLS_LIST, headers={**JSON_RPC, "Authorization": "Basic eDp5"})
            metadata_url = missing.headers["www-authenticate"].split('resource_metadata="')[1].rstrip('"')
            metadata = await http.get(metadata_url)
            good = await http.post(
                server.url, json=HELLO, headers={**JSON_RPC, "Authorization": f"Bearer {TOKENS['alice']}"}
            )
    for refused in (missing, wrong, basic):
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
        assert "mcp-session-id" not in refused.headers
    assert metadata_url == f"http://127.0.0.1:{free_tcp_port}/.well-known/oauth-protected-resource/mcp"
    assert metadata.json() == {
        "resource": f"http://127.0.0.1:{free_tcp_port}/mcp",
        "bearer_methods_supported": ["header"],
        "resource_name": "agent-server",
    }
    assert good.status_code == 200


@pytest.mark.parametrize("mode", MODES)
async def test_two_principals_over_http_see_only_their_own(dirs: ServerDirs, free_tcp_port: int, mode: str) -> None:
    async with serve(dirs, free_tcp_port, STATIC) as server:
        with anyio.fail_after(40):
            async with client_of(server.url, TOKENS["alice"], mode) as alice:
                turn = await _structured(alice, "run_turn", {"prompt": "hi", "session_id": "new"})
            async with client_of(server.url, TOKENS["bob"], mode) as bob:
                listed = await _structured(bob, "session_list", {})
                foreign_session = await _structured(bob, "session_get", {"session_id": turn["session_id"]})
                foreign_turn = await _structured(bob, "turn_get", {"turn_id": turn["turn_id"]})
                own = await _structured(bob, "run_turn", {"prompt": "hi", "session_id": "new"})
            async with client_of(server.url, TOKENS["alice"], mode) as alice:
                mine = await _structured(alice, "session_list", {})
                again = await _structured(alice, "turn_get", {"turn_id": turn["turn_id"]})
    assert turn["final_text"] == "alice's answer"
    assert listed["sessions"] == []
    assert foreign_session["error"]["type"] == "session_not_found"
    assert foreign_turn["error"]["type"] == "turn_not_found"
    assert own["final_text"] == "bob's answer"
    assert [s["session_id"] for s in mine["sessions"]] == [turn["session_id"]]
    assert (again["turn_id"], again["status"]) == (turn["turn_id"], "completed")  # found by its id alone


async def test_an_mcp_session_is_its_credentials_only(dirs: ServerDirs, free_tcp_port: int) -> None:
    """Handshake era: bob's token with alice's `Mcp-Session-Id` is answered as an unknown session (the SDK)."""
    legacy = {**JSON_RPC, "MCP-Protocol-Version": "2025-11-25"}
    async with serve(dirs, free_tcp_port, STATIC) as server, httpx.AsyncClient() as http:
        with anyio.fail_after(10):
            opened = await http.post(
                server.url, json=HELLO, headers={**legacy, "Authorization": f"Bearer {TOKENS['alice']}"}
            )
            session = {"Mcp-Session-Id": opened.headers["mcp-session-id"]}
            stolen = await http.post(
                server.url,
                json=TOOLS_LIST,
                headers={**legacy, **session, "Authorization": f"Bearer {TOKENS['bob']}"},
            )
    assert opened.status_code == 200
    assert stolen.status_code == 404


async def test_jwts_of_the_configured_issuer_over_http(dirs: ServerDirs, free_tcp_port: int) -> None:
    key, stranger = SigningKey("k1"), SigningKey("k1")
    audience = f"http://127.0.0.1:{free_tcp_port}/mcp"
    async with jwks_server(key_set(key)) as jwks:
        config = {"auth": {"jwt": {"issuer": ISSUER, "jwks_url": jwks.url, "audience": audience}}}
        async with serve(dirs, free_tcp_port, config) as server, httpx.AsyncClient() as http:
            with anyio.fail_after(40):
                alice_token = key.token("alice", aud=audience)
                async with client_of(server.url, alice_token, "auto") as alice:
                    turn = await _structured(alice, "run_turn", {"prompt": "hi", "session_id": "new"})
                async with client_of(server.url, key.token("bob", aud=audience), "legacy") as bob:
                    listed = await _structured(bob, "session_list", {})
                forged = await http.post(
                    server.url,
                    json=TOOLS_LIST,
                    headers={**JSON_RPC, "Authorization": f"Bearer {stranger.token('alice', aud=audience)}"},
                )
                metadata = await http.get(f"http://127.0.0.1:{free_tcp_port}/.well-known/oauth-protected-resource/mcp")
    assert turn["final_text"] == "alice's answer"
    assert listed["sessions"] == []
    assert forged.status_code == 401
    assert metadata.json()["authorization_servers"] == [ISSUER]
    assert metadata.json()["resource"] == audience


async def test_a_non_loopback_bind_without_auth_does_not_start(dirs: ServerDirs, free_tcp_port: int) -> None:
    argv = [*dirs.argv(SCRIPT), "--transport", "streamable-http", "--host", "0.0.0.0", "--port", str(free_tcp_port)]
    with anyio.fail_after(20):
        done = await anyio.run_process(argv, env=server_env(), check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert b"auth.tokens" in done.stderr and b"not a loopback address" in done.stderr
    with socket.socket() as probe:  # nothing listens
        assert probe.connect_ex(("127.0.0.1", free_tcp_port)) != 0


async def test_a_non_loopback_bind_checks_host_and_origin_against_the_settings(
    dirs: ServerDirs, free_tcp_port: int
) -> None:
    config = {**STATIC, "http": {"allowed_hosts": ["agents.example.test:*"]}}
    authorized = {**JSON_RPC, "Authorization": f"Bearer {TOKENS['alice']}"}
    async with serve(dirs, free_tcp_port, config, host="0.0.0.0") as server, httpx.AsyncClient() as http:
        with anyio.fail_after(10):
            anonymous = await http.post(server.url, json=TOOLS_LIST, headers=JSON_RPC)
            by_address = await http.post(server.url, json=HELLO, headers=authorized)
            named = {**authorized, "Host": f"agents.example.test:{free_tcp_port}"}
            by_name = await http.post(server.url, json=HELLO, headers=named)
            foreign_origin = await http.post(server.url, json=HELLO, headers={**named, "Origin": "http://evil.example"})
    assert anonymous.status_code == 401  # before any other check: nothing of the request is read
    assert by_address.status_code == 421  # 127.0.0.1 is not an allowed host of this bind
    assert by_name.status_code == 200
    assert foreign_origin.status_code == 403


def _open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def _until_at_most(pid: int, descriptors: int) -> None:
    """Until the server process holds at most `descriptors` (poll: it is another process); bounded by the caller."""
    while True:
        if _open_descriptors(pid) <= descriptors:
            return
        await anyio.sleep(0.05)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts the server's descriptors in /proc")
async def test_connections_that_trickle_their_headers_are_closed(dirs: ServerDirs, free_tcp_port: int) -> None:
    """300 connections that send part of a request line and then a byte now and then: each is closed within
    `http.header_timeout_s` (1 s here), and the server's descriptors go back to what they were."""
    config = {**STATIC, "http": {"header_timeout_s": 1}}
    async with serve(dirs, free_tcp_port, config) as server:
        pid = server.process.pid
        baseline = _open_descriptors(pid)
        closed = 0
        with anyio.fail_after(15):
            streams = [await anyio.connect_tcp("127.0.0.1", free_tcp_port) for _ in range(300)]

            async def trickle(stream: anyio.abc.SocketStream) -> None:
                nonlocal closed
                try:
                    await stream.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                    while True:
                        with anyio.move_on_after(0.3):
                            if await stream.receive() == b"":  # anything read is the server closing it
                                break
                        await stream.send(b"X")  # one more byte of a header that never ends
                except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError):
                    pass
                closed += 1
                await stream.aclose()

            async with anyio.create_task_group() as tg:
                for stream in streams:
                    tg.start_soon(trickle, stream)
            await _until_at_most(pid, baseline)
            async with httpx.AsyncClient() as http:
                good = await http.post(
                    server.url, json=HELLO, headers={**JSON_RPC, "Authorization": f"Bearer {TOKENS['alice']}"}
                )
    assert closed == 300
    assert good.status_code == 200


async def test_each_principal_has_its_own_room_of_mcp_sessions(dirs: ServerDirs, free_tcp_port: int) -> None:
    """`limits.mcp_sessions` per principal: alice at her limit is refused (429, naming the setting) while bob opens
    one; a session counts until it is deleted or idles out."""
    config = {**STATIC, "limits": {"mcp_sessions": 2}, "http": {"session_idle_timeout_s": 1}}
    legacy = {**JSON_RPC, "MCP-Protocol-Version": "2025-11-25"}
    as_alice = {**legacy, "Authorization": f"Bearer {TOKENS['alice']}"}
    as_bob = {**legacy, "Authorization": f"Bearer {TOKENS['bob']}"}
    async with serve(dirs, free_tcp_port, config) as server, httpx.AsyncClient() as http:
        with anyio.fail_after(30):
            first, second = [await http.post(server.url, json=HELLO, headers=as_alice) for _ in range(2)]
            refused = await http.post(server.url, json=HELLO, headers=as_alice)
            bobs = await http.post(server.url, json=HELLO, headers=as_bob)
            in_session = {**as_alice, "Mcp-Session-Id": first.headers["mcp-session-id"]}
            still_served = await http.post(server.url, json=TOOLS_LIST, headers=in_session)
            deleted = await http.delete(server.url, headers=in_session)
            after_delete = await http.post(server.url, json=HELLO, headers=as_alice)
            for _ in range(100):  # the two open ones idle out after 1 s
                idle = await http.post(server.url, json=HELLO, headers=as_alice)
                if idle.status_code != 429:
                    break
                await anyio.sleep(0.2)
    assert [first.status_code, second.status_code, bobs.status_code] == [200, 200, 200]
    assert refused.status_code == 429 and "mcp-session-id" not in refused.headers
    assert "limits.mcp_sessions" in refused.json()["error"]["message"]
    assert still_served.status_code == 200  # an open session's own requests are never refused
    assert deleted.status_code == 200 and after_delete.status_code == 200
    assert idle.status_code == 200
