"""Optional tier: one real tool-using turn against a local llama.cpp-class server (`-m localmodel`).

Set `AGENT_SERVER_TEST_LOCAL_URL` to the server's OpenAI base URL (ending in `/v1`, e.g.
`http://127.0.0.1:8080/v1`); `AGENT_SERVER_TEST_LOCAL_MODEL` names the model (default `local`),
`AGENT_SERVER_TEST_LOCAL_CONTEXT` its window in tokens (default 4096). The turn runs with the settings
the README recommends for local models (temperature 0, a seed, bounded `max_tokens`, text tool calls
parsed). It passes when the model called `read_file` with valid arguments and the file's content
reached the model in the next request (a follow-up sampling ran after the tool round); what a small
model then answers is not judged.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from mcp import Client

from agent_server.llm.openai import OpenAIChatLLM
from agent_server.server.app import create_server
from agent_server.settings import OpenAIOptions
from tests.interaction.harness import make_settings

URL = os.environ.get("AGENT_SERVER_TEST_LOCAL_URL")
CODE_WORD = "marmalade-7"

pytestmark = [
    pytest.mark.localmodel,
    pytest.mark.anyio,
    pytest.mark.skipif(
        not URL, reason="no local model server: set AGENT_SERVER_TEST_LOCAL_URL to its OpenAI base URL (…/v1)"
    ),
]


async def test_a_local_model_calls_a_tool_and_its_result_reaches_the_model(tmp_path: Path) -> None:
    assert URL is not None
    options = OpenAIOptions(
        base_url=URL,
        temperature=0,
        seed=0,
        max_tokens=256,
        parse_text_tool_calls="auto",
        read_timeout_s=600,
        max_attempts=2,
    )
    settings = make_settings(
        tmp_path, openai=options, context_window=int(os.environ.get("AGENT_SERVER_TEST_LOCAL_CONTEXT", "4096"))
    )
    (settings.workspace / "notes.txt").write_text(f"The code word is {CODE_WORD}.\n")
    llm = OpenAIChatLLM(options, api_key=None, model=os.environ.get("AGENT_SERVER_TEST_LOCAL_MODEL", "local"))
    prompt = "Call the read_file tool with path notes.txt, then tell me the code word written in that file."
    try:
        with anyio.fail_after(1200):
            async with Client(create_server(settings, llm=llm), mode="legacy") as client:
                arguments = {"prompt": prompt, "max_tool_passes": 3, "detail": "full"}
                result = await client.call_tool("run_turn", arguments)
    finally:
        await llm.aclose()
    record = result.structured_content or {}
    assert record.get("status") in {"completed", "halted"}, record
    reads = [
        (call, res)
        for tool_round in record["tool_rounds"]
        for call, res in zip(tool_round["requested_tools"], tool_round["tool_results"], strict=True)
        if call["name"] == "read_file"
    ]
    assert reads, f"the model never called read_file: {record['assistant_turns']}"
    call, tool_result = next(((c, r) for c, r in reads if not r["is_error"]), reads[0])
    assert call["arguments_error"] is None and not tool_result["is_error"], (call, tool_result)
    assert CODE_WORD in tool_result["content"][0]["text"]
    assert len(record["assistant_turns"]) >= 2  # the model was sampled again with the result
