"""Secrets of a mounted server (`${VAR}` values in its URL and headers, URL credentials) never surface:
not in `agent_tools`, the log, the prompt sent to the model, or the errors of calls."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from agent_server.llm.base import ModelRequest, ModelResponse
from agent_server.llm.scripted import ScriptedLLM
from agent_server.server.app import create_server
from tests.interaction.harness import MODES, make_settings

pytestmark = pytest.mark.anyio

SECRETS = {
    "MOUNT_PASSWORD": "pw-s3cret-1111",
    "MOUNT_KEY": "key-s3cret-2222",
    "MOUNT_TOKEN": "tok-s3cret-3333",
    "MOUNT_PATH": "path-s3cret-4444",
}


class RecordingLLM(ScriptedLLM):
    """The scripted model, keeping every request it was sent."""

    def __init__(self, responses: list[dict[str, Any]]) -> None:
        super().__init__(responses)
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest, **kwargs: Any) -> ModelResponse:
        self.requests.append(request)
        return await super().complete(request, **kwargs)


def _leaks(text: str) -> list[str]:
    return [secret for secret in SECRETS.values() if secret in text]


@pytest.mark.parametrize("mode", MODES)
async def test_secrets_in_a_mounts_url_and_headers_reach_neither_agent_tools_nor_log_nor_model(
    tmp_path: Path, mode: str, free_tcp_port: int, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    url = f"http://alice:${{MOUNT_PASSWORD}}@127.0.0.1:{free_tcp_port}/${{MOUNT_PATH}}/mcp?key=${{MOUNT_KEY}}"
    servers = {"web": {"url": url, "headers": {"Authorization": "Bearer ${MOUNT_TOKEN}"}, "startup_timeout_s": 10}}
    settings = make_settings(tmp_path, mcpServers=servers)
    llm = RecordingLLM([{"tool_calls": [{"name": "web__anything", "arguments": {}}]}, {"content": "done"}])
    server = create_server(settings, llm=llm)
    caplog.set_level(logging.DEBUG)
    with anyio.fail_after(30):
        async with Client(server, mode=mode) as client:
            turn = await client.call_tool("run_turn", {"prompt": "go"})  # nothing listens: the mount fails
            listed = await client.call_tool("agent_tools", {})
    assert turn.structured_content is not None and turn.structured_content["status"] == "completed"
    (web,) = listed.structured_content["servers"]  # type: ignore[index]
    assert web["state"] == "failed"
    assert "http://***@127.0.0.1" in web["error"] and "/***/mcp?key=***" in web["error"], web["error"]
    prompt = "\n".join(request.model_dump_json() for request in llm.requests)
    assert "unavailable this turn" in prompt
    everything = {
        "agent_tools": str(listed.model_dump()),
        "run_turn": str(turn.model_dump()),
        "model": prompt,
        "log": "\n".join(record.getMessage() for record in caplog.records),
    }
    assert {where: _leaks(text) for where, text in everything.items()} == dict.fromkeys(everything, [])
