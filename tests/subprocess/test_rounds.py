"""2026-07-28 `InputRequiredResult` rounds over real stdio: the sealed `requestState` and the input requests
cross the JSON-RPC wire, and the SDK client's retries resume the parked turn (the client's model, an
approval)."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client import ClientRequestContext

from tests.subprocess.helpers import Progress, ServerDirs, server_env

pytestmark = pytest.mark.anyio

TOOLS_CAP = types.SamplingCapability(tools=types.SamplingToolsCapability())


def _params(dirs: ServerDirs, *extra: str) -> StdioServerParameters:
    command, *args = dirs.argv([], script="unused.json")
    args = args[: args.index("--llm")] + list(extra)
    return StdioServerParameters(command=command, args=args, env=server_env(), cwd=str(dirs.root))


async def read_then_answer(context: ClientRequestContext, params: types.CreateMessageRequestParams) -> object:
    results = [b for m in params.messages for b in m.content_as_list if isinstance(b, types.ToolResultContent)]
    if not results:
        use = types.ToolUseContent(type="tool_use", id="use-1", name="read_file", input={"path": "notes.txt"})
        return types.CreateMessageResultWithTools(role="assistant", model="m", stop_reason="toolUse", content=[use])
    text = results[0].content[0]
    assert isinstance(text, types.TextContent)
    return types.CreateMessageResult(
        role="assistant", model="m", content=types.TextContent(type="text", text=f"It says: {text.text.strip()}")
    )


async def test_the_clients_model_over_stdio_rounds(dirs: ServerDirs) -> None:
    (dirs.workspace / "notes.txt").write_text("the launch code is 4711\n")
    progress = Progress()
    with anyio.fail_after(30):
        async with Client(
            _params(dirs, "--llm", "sampling"), sampling_callback=read_then_answer, sampling_capabilities=TOOLS_CAP
        ) as client:
            assert client.protocol_version == "2026-07-28"
            result = await client.call_tool("run_turn", {"prompt": "What is the code?"}, progress_callback=progress)
    record = result.structured_content
    assert record is not None and record["status"] == "completed", record
    assert record["final_text"] == "It says: the launch code is 4711"
    assert any(m.startswith("read_file: ok in") for m in progress.messages), progress.messages


async def test_an_approval_over_stdio_rounds(dirs: ServerDirs) -> None:
    script = [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}]},
        {"expect_contains": "a.txt", "content": "written"},
    ]
    path = dirs.write_script(script, "script.json")
    asked: list[str] = []

    async def allow(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "allow_once"})

    with anyio.fail_after(30):
        params = _params(dirs, "--llm", f"script:{path}", "--allow-write")
        async with Client(params, elicitation_callback=allow) as client:
            result = await client.call_tool("run_turn", {"prompt": "write it", "detail": "full"})
    record = result.structured_content
    assert record is not None and record["status"] == "completed", record
    assert [(a["channel"], a["decision"]) for a in record["approvals"]] == [("input_required", "allow_once")]
    assert (dirs.workspace / "a.txt").read_text() == "hi"
    assert len(asked) == 1 and "write_file" in asked[0]
