"""Full-fidelity events for clients that opt in, and token coalescing."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from agent_server.events import AGENT_EVENT_ADAPTER
from agent_server.llm.scripted import ScriptedLLM
from agent_server.server.app import create_server
from tests.interaction.harness import MODES, Progress, connect, make_settings

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("mode", MODES)]

SCRIPT = [
    {"content": "checking", "tool_calls": [{"name": "list_dir", "arguments": {}}]},
    {"content": "The workspace holds one file, a.txt, and that is all there is to say about it."},
]


async def test_opted_in_client_receives_every_event_kind_in_order(tmp_path: Path, mode: str) -> None:
    async with connect(tmp_path, SCRIPT, mode=mode) as h:
        (h.workspace / "a.txt").write_text("a")
        prompts_dir = h.workspace / ".agent_server" / "prompts"
        prompts_dir.mkdir(parents=True)
        (prompts_dir / "style.md").write_text("Answer briefly.")
        with anyio.fail_after(5):
            result = await h.call("run_turn", {"prompt": "what is here?"})
            await h.events.until_done(result.structured_content["turn_id"])
    events = h.events.events
    for event in events:
        AGENT_EVENT_ADAPTER.validate_python(event)  # every event matches schemas/event.json's models
    kinds = [e["type"] for e in events]
    assert kinds[0] == "turn" and kinds[-1] == "done"
    assert {"status", "prompt_trace", "token", "tool_start", "tool_result"} <= set(kinds)
    assert kinds.index("tool_start") < kinds.index("tool_result")
    trace = next(e for e in events if e["type"] == "prompt_trace")
    assert [p["id"] for p in trace["parts"]] == ["default", "workspace:style.md"]
    assert all(p["tokens"] > 0 for p in trace["parts"])
    tokens = "".join(e["delta"] for e in events if e["type"] == "token")
    assert tokens == "checking" + SCRIPT[1]["content"]
    assert {e["turn_id"] for e in events} == {result.structured_content["turn_id"]}


async def test_token_deltas_are_coalesced(tmp_path: Path, mode: str) -> None:
    async with connect(tmp_path, SCRIPT[1:], mode=mode, token_flush_interval_s=3600) as h:
        progress = Progress()
        await h.call("run_turn", {"prompt": "x"}, progress_callback=progress)
    token_events = [e for e in h.events.events if e["type"] == "token"]
    assert len(h.llm.calls) == 1
    # The scripted model streams the answer in many chunks; they arrive as one event.
    assert len(token_events) == 1 and token_events[0]["delta"] == SCRIPT[1]["content"]
    assert sum(m.startswith("text: ") for m in progress.messages) == 1


async def test_client_without_the_extension_gets_progress_only(tmp_path: Path, mode: str) -> None:
    settings = make_settings(tmp_path)
    server = create_server(settings, llm=ScriptedLLM([{"content": "hi"}]))
    progress = Progress()
    with anyio.fail_after(5):
        async with Client(server, mode=mode) as client:
            result = await client.call_tool("run_turn", {"prompt": "x"}, progress_callback=progress)
    assert result.structured_content["status"] == "completed"
    assert progress.messages[-1] == "done: completed"


async def test_a_silent_model_call_sends_heartbeats_saying_what_the_turn_waits_on(tmp_path: Path, mode: str) -> None:
    script = [{"delay_s": 0.6, "content": "slow answer"}, {"content": "second"}]
    first, second = Progress(), Progress()
    sampling = anyio.Event()

    async def on_first(progress: float, total: float | None, message: str | None) -> None:
        await first(progress, total, message)
        if (message or "").startswith("sampling"):
            sampling.set()

    async with connect(tmp_path, script, mode=mode, heartbeat_s=0.1) as h:
        session = (await h.call("session_create", {"title": "s"})).structured_content["session_id"]
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: h.call("run_turn", {"prompt": "a"}, progress_callback=on_first))
                await sampling.wait()
                await h.call("run_turn", {"prompt": "b", "session_id": session}, progress_callback=second)
    assert any(m.startswith("waiting for the model (") for m in first.messages), first.messages
    assert any(m.startswith("waiting for an earlier turn of this session to finish (") for m in second.messages)
    values = [p for p, _, _ in first.updates]
    assert values == sorted(set(values)), "heartbeats keep progress strictly increasing"
    beats = [e for e in h.events.events if e["type"] == "status" and e["phase"] == "heartbeat"]
    assert beats and all(e["message"].startswith("waiting for ") for e in beats)


async def test_no_heartbeat_by_default_for_a_call_shorter_than_ten_seconds(tmp_path: Path, mode: str) -> None:
    progress = Progress()
    async with connect(tmp_path, [{"delay_s": 0.3, "content": "done"}], mode=mode) as h:
        assert h.settings.heartbeat_s == 10
        with anyio.fail_after(10):
            await h.call("run_turn", {"prompt": "a"}, progress_callback=progress)
    assert progress.messages and not [m for m in progress.messages if m.startswith("waiting for")]
