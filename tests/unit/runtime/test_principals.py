"""`AgentRuntime.as_principal`: the Python API's one place for whom calls are made; ownership and queued turns."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from agent_server import AgentRuntime, InvalidArgument, SessionNotFound, Settings
from agent_server.errors import TurnNotFound
from agent_server.testing import ScriptedLLM

pytestmark = pytest.mark.anyio


def _settings(tmp_path: Path, **overrides: object) -> Settings:
    (tmp_path / "ws").mkdir(exist_ok=True)
    return Settings.model_validate({"workspace": tmp_path / "ws", "state_dir": tmp_path / "state", **overrides})


async def test_views_share_the_runtime_and_each_reaches_only_its_own(tmp_path: Path) -> None:
    llm = ScriptedLLM([{"content": "alice's"}, {"content": "local's"}])
    with anyio.fail_after(10):
        async with AgentRuntime(_settings(tmp_path), llm=llm) as runtime:
            alice = runtime.as_principal("alice")
            assert (runtime.principal, alice.principal) == ("local", "alice")
            assert runtime.as_principal("local") is runtime
            theirs = await alice.run_turn("hi", session_id="new")
            ours = await runtime.run_turn("hi", session_id="new")
            with pytest.raises(SessionNotFound):
                await runtime.get_session(theirs.session_id)
            with pytest.raises(TurnNotFound):
                await runtime.find_turn(theirs.turn_id)
            with pytest.raises(SessionNotFound):
                await alice.fork_session(ours.session_id)
            found = await alice.find_turn(theirs.turn_id)
            views = (("a", alice), ("l", runtime))
            listed = {p: [s.session_id for s in (await v.list_sessions())[0]] for p, v in views}
    assert found.final_text == "alice's"
    assert listed == {"a": [theirs.session_id], "l": [ours.session_id]}


@pytest.mark.parametrize("name", ["", "a\nb", "x" * 257, "bidi\u202e"])
def test_a_principal_is_a_short_printable_name(tmp_path: Path, name: str) -> None:
    runtime = AgentRuntime(_settings(tmp_path), llm=ScriptedLLM([]))
    with pytest.raises(InvalidArgument, match="principal"):
        runtime.as_principal(name)


async def test_queued_turns_are_bounded_per_principal(tmp_path: Path) -> None:
    """Turns waiting for an earlier turn of their session count against their principal's `limits.queued_turns`."""
    llm = ScriptedLLM([{"delay_s": 60, "content": "slow"}, {"content": "bob's"}])
    settings = _settings(tmp_path, limits={"queued_turns": 2})
    with anyio.fail_after(20):
        async with AgentRuntime(settings, llm=llm) as runtime:
            alice, bob = runtime.as_principal("alice"), runtime.as_principal("bob")
            session = (await alice.create_session()).session_id
            began = anyio.Event()
            queued = [anyio.Event(), anyio.Event()]

            async def on_event(_event: object) -> None:
                began.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: alice.run_turn("slow", session_id=session, on_event=on_event))
                await began.wait()
                for waiting in queued:

                    async def queue(waiting: anyio.Event = waiting) -> None:
                        await alice.run_turn("next", session_id=session, on_wait=lambda _what: waiting.set())

                    tg.start_soon(queue)
                    await waiting.wait()
                with pytest.raises(InvalidArgument, match=r"limits\.queued_turns"):
                    await alice.run_turn("one too many", session_id=session)
                others = await bob.run_turn("mine", session_id="new")  # bob is not held up by alice's queue
                tg.cancel_scope.cancel()
    assert others.status == "completed" and others.final_text == "bob's"
