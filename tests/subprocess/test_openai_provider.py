"""agent-server with the OpenAI-compatible provider against a fake HTTP model on 127.0.0.1.

The key configured through OPENAI_API_KEY must not appear anywhere in the state dir or the
server's stderr after a turn, even at DEBUG and even when the model server echoes it back.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.fakes.openai_server import FakeOpenAIServer, Reply, call_delta, chunk, text_stream, usage_chunk
from tests.subprocess.helpers import ServerDirs, server_env

pytestmark = pytest.mark.anyio

API_KEY = "sk-test-DO-NOT-LEAK-0123456789abcdef"


def _tool_call_stream() -> list[object]:
    call = call_delta(0, id="call_1", name="read_file", arguments='{"path": "fact.txt"}')
    return [chunk(tool_calls=[call]), chunk(finish_reason="tool_calls"), usage_chunk(20, 5)]


async def test_turn_with_retry_keeps_only_the_successful_text_and_never_leaks_the_key(dirs: ServerDirs) -> None:
    (dirs.workspace / "fact.txt").write_text("the sky is green here")
    echo_key = {"error": {"message": f"bad request from Bearer {API_KEY}"}}
    async with FakeOpenAIServer() as model:
        model.add(
            Reply(sse=_tool_call_stream()),
            Reply(status=500, json=echo_key),
            Reply(sse=text_stream("Discarded ", "words"), cut_after=2),
            Reply(sse=text_stream("The sky ", "is green.")),
        )
        env = server_env() | {"OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": model.base_url}
        env["AGENT_SERVER_MODEL"] = "fake-model"
        argv = ["-m", "agent_server", "--workspace", str(dirs.workspace), "--state-dir", str(dirs.state)]
        argv += ["--log-level", "DEBUG", "--config", str(_fast_retries(dirs.root))]
        params = StdioServerParameters(command=sys.executable, args=argv, env=env)
        messages: list[str] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            messages.append(message or "")

        with tempfile.TemporaryFile("w+") as errlog, anyio.fail_after(30):
            async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
                result = await client.call_tool("run_turn", {"prompt": "What colour?"}, progress_callback=on_progress)
            errlog.seek(0)
            stderr = errlog.read()
        requests = list(model.requests)
    record = result.structured_content
    assert record["status"] == "completed", record
    assert record["final_text"] == "The sky is green."
    assert record["usage"]["prompt_tokens"] >= 20
    assert any("discarded" in m for m in messages)
    assert "the sky is green here" in str(requests[1].json)
    assert requests[0].headers["authorization"] == f"Bearer {API_KEY}"
    assert "openai" in stderr.lower()  # DEBUG logging ran
    assert API_KEY not in stderr
    for path in dirs.state.rglob("*"):
        if path.is_file():
            assert API_KEY.encode() not in path.read_bytes(), path


def _fast_retries(root: Path) -> Path:
    config = root / "agent.json"
    config.write_text('{"openai": {"backoff_base_s": 0, "backoff_max_s": 0, "max_attempts": 4}}')
    return config
