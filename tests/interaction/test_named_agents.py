"""Named agents over MCP: `run_turn(agent=...)`, one tool per agent, sessions that remember their agent, the
agent's tools, model and output schema, and `tools/list_changed` when the definition files change.

The reviewer is a `.claude/agents/reviewer.md` file in Claude Code's format as its documentation shows it; the
scripted model checks what it receives (system prompt, tool list).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.interaction.harness import MODES, connect, make_settings

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("mode", MODES)]

REVIEWER = (Path(__file__).parent / "data" / "reviewer.md").read_text(encoding="utf-8")
"""A subagent file as Claude Code's documentation writes one (front matter name, description, tools, model)."""
VERDICT = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
SUMMARIZER = {
    "description": "Summarises one file in a JSON verdict. Use when a file needs a quick check.",
    "instructions": "Read the file, then answer with the verdict only.",
    "tools": ["read_file"],
    "output_schema": VERDICT,
}


def with_reviewer(tmp_path: Path, **overrides: Any) -> Any:
    settings = make_settings(tmp_path, agents={"summarizer": SUMMARIZER}, **overrides)
    agents = settings.workspace / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "reviewer.md").write_text(REVIEWER, encoding="utf-8")
    return settings


def tool_names(request: Any) -> list[str]:
    return sorted(spec.name for spec in request.tools)


async def test_each_named_agent_is_a_tool_described_by_the_agent(tmp_path: Path, mode: str) -> None:
    async with connect(tmp_path, [], mode=mode, settings=with_reviewer(tmp_path)) as h:
        tools = {tool.name: tool for tool in (await h.client.list_tools()).tools}
        report = (await h.call("agent_tools")).structured_content or {}
    agents = {a["name"]: a for a in report["agents"]}
    assert agents["reviewer"]["source"] == ".claude/agents/reviewer.md"
    assert agents["reviewer"]["tools"] == ["read_file", "search_text", "list_dir", "run_command"]
    assert agents["summarizer"] == {
        "name": "summarizer",
        "description": SUMMARIZER["description"],
        "source": "settings",
        "tools": ["read_file"],
        "model": None,
        "output_schema": True,
    }
    run_turn = tools["run_turn"]
    assert "agent" in run_turn.input_schema["properties"]
    for name, description in [
        ("reviewer", "Expert code review specialist. Proactively reviews code"),
        ("summarizer", SUMMARIZER["description"]),
    ]:
        tool = tools[name]
        assert (tool.description or "").startswith(description)
        expected = set(run_turn.input_schema["properties"]) - {"agent"}
        assert set(tool.input_schema["properties"]) == expected
        assert tool.output_schema == run_turn.output_schema


async def test_the_agents_tool_runs_a_turn_as_the_agent(tmp_path: Path, mode: str) -> None:
    script = [{"content": "Looks good."}, {"content": "Still good."}]
    async with connect(tmp_path, script, mode=mode, settings=with_reviewer(tmp_path)) as h:
        result = await h.call("reviewer", {"prompt": "Review the change"})
        record = result.structured_content or {}
        session = await h.call("session_get", {"session_id": record["session_id"]})
        again = await h.call("run_turn", {"prompt": "And now?", "session_id": record["session_id"]})
        first, second = h.llm.calls
    assert record["status"] == "completed" and record["agent"] == "reviewer"
    assert "You are a senior code reviewer" in first.messages[0].text()
    # Read, Grep, Glob as the built-ins; Bash is run_command (off here), WebFetch is no tool of this server.
    assert tool_names(first) == ["list_dir", "read_file", "search_text"]
    assert (session.structured_content or {})["metadata"]["agent"] == "reviewer"
    # The session remembers its agent: a turn that names none runs as it.
    assert (again.structured_content or {})["agent"] == "reviewer"
    assert tool_names(second) == tool_names(first)
    assert "You are a senior code reviewer" in second.messages[0].text()


async def test_an_agent_limited_to_read_file_gets_only_it_and_answers_in_its_schema(tmp_path: Path, mode: str) -> None:
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"expect_contains": "hello", "content": '{"ok": true}'},
    ]
    async with connect(tmp_path, script, mode=mode, settings=with_reviewer(tmp_path)) as h:
        (h.workspace / "a.txt").write_text("hello")
        result = await h.call("run_turn", {"prompt": "Check a.txt", "agent": "summarizer", "tools": ["*"]})
        first = h.llm.calls[0]
    record = result.structured_content or {}
    assert record["status"] == "completed", record
    assert tool_names(first) == ["read_file"]  # the caller's `*` cannot widen the agent's tools
    assert record["structured_output"] == {"ok": True}
    assert "Read the file, then answer" in first.messages[0].text()


async def test_the_default_agent_and_unknown_agents(tmp_path: Path, mode: str) -> None:
    async with connect(tmp_path, [{"content": "plain"}], mode=mode, settings=with_reviewer(tmp_path)) as h:
        unknown = await h.call("run_turn", {"prompt": "Hi", "agent": "nobody"})
        plain = await h.call("run_turn", {"prompt": "Hi", "agent": "default"})
        assert "You are a senior code reviewer" not in h.llm.calls[0].messages[0].text()
        with pytest.raises(Exception, match="takes no `agent` argument"):
            await h.client.call_tool("reviewer", {"prompt": "Hi", "agent": "summarizer"})
    assert unknown.is_error is True
    text = unknown.content[0].text  # type: ignore[union-attr]
    assert "no agent is named 'nobody'" in text and "reviewer, summarizer" in text
    assert (plain.structured_content or {})["agent"] is None


async def test_an_agent_named_like_a_server_tool_is_reached_only_through_run_turn(tmp_path: Path, mode: str) -> None:
    settings = make_settings(tmp_path, agents={"compact": {"description": "Compacts prose."}})
    async with connect(tmp_path, [{"content": "short"}], mode=mode, settings=settings) as h:
        tools = [tool for tool in (await h.client.list_tools()).tools if tool.name == "compact"]
        result = await h.call("run_turn", {"prompt": "Shorten this", "agent": "compact"})
    assert len(tools) == 1 and "Summarise a session" in (tools[0].description or "")
    assert (result.structured_content or {})["agent"] == "compact"


async def test_a_claude_model_alias_must_be_mapped_in_the_settings(tmp_path: Path, mode: str) -> None:
    script = tmp_path / "sonnet.json"
    script.write_text(json.dumps({"responses": [{"content": "from the sonnet script"}]}))
    agents = {
        "quick": {"description": "Answers quickly.", "model": "haiku"},
        "deep": {"description": "Thinks deeply.", "model": "sonnet"},
    }
    settings = make_settings(tmp_path, agents=agents, models={"sonnet": f"script:{script}"})
    async with connect(tmp_path, [], mode=mode, settings=settings) as h:
        unmapped = await h.call("run_turn", {"prompt": "Hi", "agent": "quick"})
        listed = await h.call("session_list")
        mapped = await h.call("deep", {"prompt": "Hi"})
        assert not h.llm.calls  # the server's own model was not asked
    assert (listed.structured_content or {})["sessions"] == []  # the failed call made no session
    assert unmapped.is_error is True
    error = (unmapped.structured_content or {})["error"]
    assert error["type"] == "config_error" and "map it in the settings' `models`" in error["message"]
    assert (mapped.structured_content or {})["final_text"] == "from the sonnet script"


async def test_a_new_definition_file_is_listed_and_announced(tmp_path: Path, mode: str) -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    settings = with_reviewer(tmp_path)
    async with connect(tmp_path, [], mode=mode, settings=settings, message_handler=on_message) as h:
        before = {tool.name for tool in (await h.client.list_tools()).tools}
        agents = h.workspace / ".agents" / "agents"
        agents.mkdir(parents=True)
        (agents / "tester.md").write_text("---\ndescription: Writes tests.\ntools: [read_file]\n---\nWrite tests.\n")
        await h.call("session_list")
        if mode == "legacy":  # the handshake era is told on the connection; 2026-07-28 clients list again
            with anyio.fail_after(5):
                await changed.wait()
        after = {tool.name for tool in (await h.client.list_tools()).tools}
    assert "tester" not in before and after - before == {"tester"}


async def test_a_session_created_with_an_agent_in_its_metadata_runs_as_it(tmp_path: Path, mode: str) -> None:
    script = [{"content": "ok"}, {"content": "still no JSON"}]
    async with connect(tmp_path, script, mode=mode, settings=with_reviewer(tmp_path)) as h:
        created = await h.call("session_create", {"metadata": {"agent": "summarizer"}})
        session_id = (created.structured_content or {})["session_id"]
        result = await h.call("run_turn", {"prompt": "Check", "session_id": session_id, "output_schema": VERDICT})
        request = h.llm.calls[0]
    assert [spec.name for spec in request.tools] == ["read_file"]
    record = result.structured_content or {}
    assert record["agent"] == "summarizer" and record["error"]["type"] == "output_invalid"


async def test_a_background_turn_runs_as_its_agent(tmp_path: Path, mode: str) -> None:
    async with connect(tmp_path, [{"content": "done"}], mode=mode, settings=with_reviewer(tmp_path)) as h:
        started = await h.call("reviewer", {"prompt": "Review in the background", "background": True})
        turn_id = (started.structured_content or {})["turn_id"]
        ended = await h.call("turn_wait", {"turn_id": turn_id, "timeout_s": 5})
        request = h.llm.calls[0]
    assert (ended.structured_content or {})["status"] == "completed"
    assert (ended.structured_content or {})["agent"] == "reviewer"
    assert tool_names(request) == ["list_dir", "read_file", "search_text"]
