"""Background turns end to end over an in-memory client, in both eras: run_turn(background), turn_wait,
turn_get, turn_cancel, and shutdown."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError

from agent_server.llm.base import ModelRequest, ModelResponse, RetryCallback, TextCallback
from agent_server.llm.scripted import ScriptedLLM
from agent_server.server.app import create_server
from agent_server.settings import Settings
from tests.interaction.harness import MODES, EventRecorder, Progress, make_settings

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("mode", MODES)]

ANSWER = "All done, and the answer is long enough to stream in a few chunks."


class GatedLLM:
    """A scripted model whose calls wait until the test opens the gate: the turn stays `running` for as
    long as the test needs, with no timing involved."""

    name = "gated"

    def __init__(self, responses: list[dict[str, Any]]) -> None:
        self.inner = ScriptedLLM(responses)
        self.called = anyio.Event()
        self.gate = anyio.Event()

    async def complete(
        self, request: ModelRequest, *, on_text: TextCallback | None = None, on_retry: RetryCallback | None = None
    ) -> ModelResponse:
        self.called.set()
        if not self.gate.is_set():  # once open, no checkpoint: the scripted step is consumed in this same step
            await self.gate.wait()
        return await self.inner.complete(request, on_text=on_text, on_retry=on_retry)


@dataclass
class Bench:
    client: Client
    llm: GatedLLM
    events: EventRecorder

    async def call(self, tool: str, arguments: dict[str, Any], **kwargs: Any) -> Any:
        return await self.client.call_tool(tool, arguments, **kwargs)

    async def start(self, **arguments: Any) -> dict[str, Any]:
        result = await self.call("run_turn", {"prompt": "work slowly", "background": True, **arguments})
        assert result.is_error is False, result
        return result.structured_content


@asynccontextmanager
async def bench(settings: Settings, mode: str, responses: list[dict[str, Any]] | None = None) -> AsyncIterator[Bench]:
    llm = GatedLLM(responses if responses is not None else [{"content": ANSWER}])
    recorder = EventRecorder()
    with anyio.fail_after(15):
        async with Client(create_server(settings, llm=llm), mode=mode, extensions=[recorder]) as client:
            yield Bench(client, llm, recorder)


async def test_waits_time_out_running_then_see_the_end_and_missed_events_arrive_in_order(
    tmp_path: Path, mode: str
) -> None:
    async with bench(make_settings(tmp_path, token_flush_interval_s=0), mode) as b:
        started = await b.start()
        assert started["status"] == "running" and started["finished_at"] is None
        await b.llm.called.wait()  # the turn has begun and emitted its first events before anyone waits
        first, second = Progress(), Progress()
        waiting = await b.call("turn_wait", {"turn_id": started["turn_id"], "timeout_s": 0.05}, progress_callback=first)
        again = await b.call("turn_wait", {"turn_id": started["turn_id"], "timeout_s": 0.05})
        b.llm.gate.set()
        ended = await b.call("turn_wait", {"turn_id": started["turn_id"], "timeout_s": 30}, progress_callback=second)
        got = await b.call("turn_get", {"turn_id": started["turn_id"]})
    assert waiting.structured_content["status"] == "running"
    assert waiting.content[0].text.startswith("[turn running]")
    assert again.structured_content["status"] == "running"
    assert again.structured_content["last_event"] == waiting.structured_content["last_event"]  # nothing new
    assert first.messages[0] == f"turn {started['turn_id']} started"  # missed before the wait, sent first
    assert "done: completed" not in first.messages
    assert second.messages[-1] == "done: completed"
    assert not any(m.startswith("turn ") for m in second.messages)  # this connection saw those already
    record = ended.structured_content
    assert record["status"] == "completed" and record["final_text"] == ANSWER
    assert ended.content[0].text == ANSWER
    assert got.structured_content["status"] == "completed"
    kinds = [e["type"] for e in b.events.events]
    assert kinds[0] == "turn" and kinds[-1] == "done" and kinds.count("turn") == 1 and kinds.count("done") == 1
    assert "".join(e["delta"] for e in b.events.events if e["type"] == "token") == ANSWER
    assert ended.structured_content["last_event"] == len(kinds)


async def test_after_event_replays_from_the_start_for_a_new_follower(tmp_path: Path, mode: str) -> None:
    async with bench(make_settings(tmp_path), mode) as b:
        started = await b.start()
        b.llm.gate.set()
        await b.call("turn_wait", {"turn_id": started["turn_id"]})
        replay = Progress()
        again = await b.call("turn_wait", {"turn_id": started["turn_id"], "after_event": 0}, progress_callback=replay)
    assert again.structured_content["status"] == "completed"
    assert replay.messages[0] == f"turn {started['turn_id']} started"
    assert replay.messages[-1] == "done: completed"


async def test_turn_cancel_ends_a_slow_turn_cancelled_and_the_session_goes_on(tmp_path: Path, mode: str) -> None:
    script = [{"delay_s": 60, "content": "too late"}, {"content": "next"}]
    async with bench(make_settings(tmp_path), mode, script) as b:
        b.llm.gate.set()
        started = await b.start()
        await b.llm.called.wait()
        with anyio.fail_after(5):
            cancelled = await b.call("turn_cancel", {"turn_id": started["turn_id"]})
        waited = await b.call("turn_wait", {"turn_id": started["turn_id"]})
        again = await b.call("turn_cancel", {"turn_id": started["turn_id"]})
        after = await b.call("run_turn", {"prompt": "go on", "session_id": started["session_id"]})
        stored = await b.call("session_get", {"session_id": started["session_id"]})
    assert cancelled.is_error is False
    assert cancelled.structured_content["status"] == "cancelled"
    assert cancelled.structured_content["error"]["type"] == "cancelled"
    assert waited.structured_content["status"] == "cancelled"
    assert again.is_error is True and "not running" in again.content[0].text
    assert after.structured_content["final_text"] == "next"
    assert [t["status"] for t in stored.structured_content["turns"]] == ["cancelled", "completed"]


async def test_the_callers_own_timeout_ends_its_wait_not_the_turn(tmp_path: Path, mode: str) -> None:
    async with bench(make_settings(tmp_path), mode) as b:
        started = await b.start()
        await b.llm.called.wait()
        with pytest.raises(MCPError) as timed_out:
            await b.call("turn_wait", {"turn_id": started["turn_id"]}, read_timeout_seconds=0.2)
        b.llm.gate.set()
        ended = await b.call("turn_wait", {"turn_id": started["turn_id"]})
    assert timed_out.value.code == types.REQUEST_TIMEOUT
    assert ended.structured_content["status"] == "completed"
    assert ended.structured_content["final_text"] == ANSWER


async def test_shutdown_records_a_running_background_turn_cancelled(tmp_path: Path, mode: str) -> None:
    settings = make_settings(tmp_path)
    async with bench(settings, mode) as b:
        started = await b.start()
        await b.llm.called.wait()
    async with bench(settings, mode) as b:
        got = await b.call("turn_get", {"turn_id": started["turn_id"], "session_id": started["session_id"]})
    assert got.structured_content["status"] == "cancelled"


async def test_unknown_turns_and_bad_starts_are_clear_errors(tmp_path: Path, mode: str) -> None:
    async with bench(make_settings(tmp_path), mode) as b:
        unknown = await b.call("turn_get", {"turn_id": "turn_nope"})
        waited = await b.call("turn_wait", {"turn_id": "turn_nope", "timeout_s": 0.01})
        cancel = await b.call("turn_cancel", {"turn_id": "turn_nope"})
        bad_session = await b.call("run_turn", {"prompt": "x", "background": True, "session_id": "ses_nope"})
        too_long = await b.call("turn_wait", {"turn_id": "turn_nope", "timeout_s": 601})
    for result in (unknown, waited, cancel):
        assert result.is_error is True
        assert result.structured_content["error"]["type"] == "turn_not_found"
    assert bad_session.structured_content["error"]["type"] == "session_not_found"
    assert too_long.structured_content["error"]["type"] == "invalid_argument"
