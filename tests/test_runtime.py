"""`AgentRuntime` embedded directly (no MCP): the library API a Python program uses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from agent_server import AgentEvent, AgentRuntime, InvalidArgument, SessionNotFound, Settings, TurnOptions
from agent_server.testing import ScriptedLLM
from agent_server.tools.builtin import SPECS as READ_TOOLS

pytestmark = pytest.mark.anyio


def _settings(tmp_path: Path) -> Settings:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("the answer is 42\n")
    return Settings(workspace=workspace, state_dir=tmp_path / "state")


async def test_a_turn_with_a_tool_round_through_the_embedded_runtime(tmp_path: Path) -> None:
    llm = ScriptedLLM(
        [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
            {"expect_contains": "the answer is 42", "content": "It is 42."},
            {"expect_contains": "It is 42.", "content": "Still 42."},
        ]
    )
    events: list[AgentEvent] = []

    async def on_event(event: AgentEvent) -> None:
        events.append(event)

    with anyio.fail_after(10):
        async with AgentRuntime(_settings(tmp_path), llm=llm) as runtime:
            first = await runtime.run_turn("What does notes.txt say?", on_event=on_event)
            again = await runtime.run_turn("And now?")  # the runtime's default connection continues it
            sessions, _ = await runtime.list_sessions()
    llm.assert_complete()
    assert first.status == "completed" and first.final_text == "It is 42."
    (tool_round,) = first.tool_rounds
    assert tool_round.tool_results[0].name == "read_file" and not tool_round.tool_results[0].is_error
    assert again.session_id == first.session_id and again.final_text == "Still 42."
    assert [e.type for e in events][0] == "turn" and events[-1].type == "done"
    assert {"tool_start", "tool_result"} <= {e.type for e in events}
    assert [(s.session_id, s.turn_count, s.active) for s in sessions] == [(first.session_id, 2, True)]


async def test_sessions_compact_and_errors_through_the_embedded_runtime(tmp_path: Path) -> None:
    script = [{"content": f"answer {i}"} for i in range(2)] + [{"content": "SUMMARY"}]
    with anyio.fail_after(10):
        async with AgentRuntime(_settings(tmp_path), llm=ScriptedLLM(script)) as runtime:
            made = await runtime.create_session(title="mine", connection="me")
            for i in range(2):
                await runtime.run_turn(f"q{i}", connection="me")
            record = await runtime.compact(made.session_id, keep_last=1)
            turns, _ = await runtime.list_turns(made.session_id)
            with pytest.raises(SessionNotFound):
                await runtime.run_turn("x", session_id="ses_nope")
            with pytest.raises(InvalidArgument):
                await runtime.session_or_current(None, connection="someone else")
            report = await runtime.agent_tools()
    assert made.active is True
    assert record.summary == "SUMMARY" and record.compacted_message_count == 3
    assert [t.status for t in turns] == ["completed", "completed"]
    assert {t.name for t in report.tools} == set(READ_TOOLS)


def test_a_runtime_without_mounts_never_loads_the_mount_machinery(tmp_path: Path) -> None:
    """The first call's cost: with no servers configured, the mounts (and jsonschema) are not even imported."""
    code = f"""
import sys, anyio
from agent_server import AgentRuntime, Settings
from agent_server.testing import ScriptedLLM
async def main():
    settings = Settings(workspace={str(tmp_path)!r}, state_dir={str(tmp_path / "state")!r})
    llm = ScriptedLLM([{{"tool_calls": [{{"name": "list_dir", "arguments": {{}}}}]}}, {{"content": "ok"}}])
    async with AgentRuntime(settings, llm=llm) as runtime:
        assert (await runtime.run_turn("x")).status == "completed"
anyio.run(main)
print(sorted(m for m in sys.modules if m.startswith("agent_server.mounts") or m == "jsonschema"))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "['agent_server.mounts', 'agent_server.mounts.config']"  # the settings' entry model


def test_prepare_loads_the_turn_code_and_opens_the_store_before_any_call(tmp_path: Path) -> None:
    """`prepare()` does the first call's loading ahead; a turn that does not search never imports `regex`."""
    code = f"""
import sys, anyio
from pathlib import Path
from agent_server import AgentRuntime, Settings
from agent_server.runtime import TURN_MODULES
from agent_server.testing import ScriptedLLM
async def main():
    settings = Settings(workspace={str(tmp_path)!r}, state_dir={str(tmp_path / "state")!r})
    llm = ScriptedLLM([{{"tool_calls": [{{"name": "list_dir", "arguments": {{}}}}]}}, {{"content": "ok"}}])
    async with AgentRuntime(settings, llm=llm) as runtime:
        before = [m for m in TURN_MODULES if m in sys.modules], Path(settings.state_path, "state.db").exists()
        await runtime.prepare()
        after = [m for m in TURN_MODULES if m not in sys.modules], Path(settings.state_path, "state.db").exists()
        assert (await runtime.run_turn("x")).status == "completed"
    print(before, after, "regex" in sys.modules)
anyio.run(main)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "([], False) ([], True) False"


async def test_run_turn_asks_the_channel_it_is_given(tmp_path: Path) -> None:
    """A Python program lends the turn its own way to ask the user (any `ApprovalChannel`)."""
    from agent_server.approvals import ApprovalRequest, Decision, ElicitationAnswer, ElicitationRequest
    from agent_server.settings import ApprovalSettings

    class Deny:
        name = "program"

        def __init__(self) -> None:
            self.asked: list[ApprovalRequest] = []

        async def ask(self, request: ApprovalRequest) -> Decision:
            self.asked.append(request)
            return Decision("deny", "not today")

        async def elicit(self, request: ElicitationRequest) -> ElicitationAnswer:
            return ElicitationAnswer("decline")

    base = _settings(tmp_path)
    policy = ApprovalSettings(tools={"read_file": "ask"})
    settings = Settings(workspace=base.workspace, state_dir=base.state_dir, approvals=policy)
    llm = ScriptedLLM(
        [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
            {"expect_contains": "the user denied read_file: not today", "content": "I may not read it."},
        ]
    )
    channel = Deny()
    with anyio.fail_after(10):
        async with AgentRuntime(settings, llm=llm) as runtime:
            record = await runtime.run_turn("What does notes.txt say?", options=TurnOptions(approvals=channel))
    assert record.status == "completed", record
    assert [(a.tool, a.channel, a.decision) for a in record.approvals] == [("read_file", "program", "deny")]
    assert [(r.tool, r.session_id) for r in channel.asked] == [("read_file", record.session_id)]


async def test_a_background_turn_through_the_embedded_runtime(tmp_path: Path) -> None:
    llm = ScriptedLLM([{"content": "Done in the background."}, {"delay_s": 60, "content": "never"}])
    seen: list[AgentEvent] = []

    async def on_event(event: AgentEvent) -> None:
        seen.append(event)

    with anyio.fail_after(10):
        async with AgentRuntime(_settings(tmp_path), llm=llm) as runtime:
            handle = await runtime.start_turn("Work on it")
            assert handle.record.status == "running"
            record = await handle.wait()
            await handle.follow(on_event, timeout_s=5)
            slow = await runtime.start_turn("Slow one", session_id=handle.session_id)
            cancelled = await runtime.cancel_turn(slow.turn_id)
            stored = await runtime.find_turn(handle.turn_id, handle.session_id)
    assert record.status == "completed" and record.final_text == "Done in the background."
    assert record.turn_id == handle.turn_id and stored == record
    assert [e.type for e in seen][0] == "turn" and seen[-1].type == "done"
    assert cancelled.status == "cancelled"


async def test_a_turn_whose_record_is_stored_is_found_ended_before_its_call_returns(tmp_path: Path) -> None:
    """Once the final record is in the store (another replica may read it there), this process says so too:
    looked up while the turn still sends its `done` event, it is `completed`, not its last `running` state."""
    seen: list[str] = []
    runtime = AgentRuntime(_settings(tmp_path), llm=ScriptedLLM([{"content": "Done."}]))

    async def on_event(event: AgentEvent) -> None:
        if event.type == "done":
            seen.append((await runtime.find_turn(event.turn_id)).status)

    with anyio.fail_after(10):
        async with runtime:
            record = await runtime.run_turn("Work on it", on_event=on_event)
    assert record.status == "completed" and seen == ["completed"]


async def test_a_background_turn_is_stored_before_start_turn_returns_even_when_it_queues(tmp_path: Path) -> None:
    """Durably begun: a turn queued behind another of its session is stored `running` at once, and one
    cancelled before it began is stored `cancelled` (not left `running`, nor missing)."""
    llm = ScriptedLLM([{"delay_s": 60, "content": "never"}])
    with anyio.fail_after(10):
        async with AgentRuntime(_settings(tmp_path), llm=llm) as runtime:
            first = await runtime.start_turn("Slow one")
            queued = await runtime.start_turn("Queued one", session_id=first.session_id)
            stored = await runtime.get_turn(first.session_id, queued.turn_id)
            cancelled = await runtime.cancel_turn(queued.turn_id)
            after = await runtime.get_turn(first.session_id, queued.turn_id)
            await runtime.cancel_turn(first.turn_id)
            turns, _ = await runtime.list_turns(first.session_id)
    assert stored.status == "running" and stored.prompt == "Queued one"
    assert cancelled.status == "cancelled" and cancelled.error is not None
    assert "before it began" in cancelled.error.message
    assert after == cancelled
    assert sorted(t.status for t in turns) == ["cancelled", "cancelled"]


async def test_a_view_in_its_own_workspace_runs_its_turns_there(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "only-here.txt").write_text("in the project")
    settings = Settings(workspace=tmp_path / "ws", state_dir=tmp_path / "state")
    (tmp_path / "ws").mkdir()
    script = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "only-here.txt"}}]}, {"content": "ok"}]
    with anyio.fail_after(10):
        async with (
            AgentRuntime(settings, llm=ScriptedLLM(script)) as runtime,
            runtime.in_workspace(project) as in_project,
        ):
            record = await in_project.run_turn("Read it", options=TurnOptions(max_tool_passes=1))
            assert in_project.workspace == project.resolve() and runtime.workspace == (tmp_path / "ws").resolve()
            listed = {t.name for t in (await in_project.agent_tools()).tools}
    ((result,),) = [r.tool_results for r in record.tool_rounds]
    assert not result.is_error and result.text() == "in the project"
    assert "read_file" in listed
