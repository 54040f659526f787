"""The cyclic garbage collector is paused while the command line starts the server, and only then.

`agent_server.collector`: the start's imports make no garbage worth a collection, and its collections cost the
start 7% of its time (bench/first_turn.py); what a paused start made is frozen once the runtime is entered.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from agent_server import AgentRuntime, Settings
from agent_server.cli import main
from agent_server.collector import pause_for_start, paused, resume_after_start
from agent_server.testing import ScriptedLLM

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def collector_left_running() -> Iterator[None]:
    """Each test ends with the collector running, as the test process runs with it."""
    yield
    resume_after_start()
    gc.enable()


def test_the_command_line_starts_with_the_collector_paused_and_resumes_it_on_its_way_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []

    def serve(*_: object, **__: object) -> None:
        seen.append(gc.isenabled())
        raise KeyboardInterrupt  # stop here: the process would serve now

    monkeypatch.setattr(anyio, "run", serve)
    assert main(["--workspace", str(tmp_path)]) == 130
    assert seen == [False]  # everything up to serving ran without a collection
    assert gc.isenabled()  # a command that ends before its runtime is entered resumes the collector too


def test_a_refused_start_resumes_the_collector(tmp_path: Path) -> None:
    assert main(["--workspace", str(tmp_path), "--llm", f"script:{tmp_path / 'nope.json'}"]) == 2
    assert gc.isenabled()


async def test_entering_the_runtime_freezes_what_the_start_made_and_resumes_the_collector(tmp_path: Path) -> None:
    pause_for_start()
    made_at_start = [[n] for n in range(1000)]  # tracked objects, as the start's imports make
    frozen_before = gc.get_freeze_count()
    runtime = AgentRuntime(Settings(workspace=tmp_path, state_dir=tmp_path / "state"), llm=ScriptedLLM([]))
    assert not gc.isenabled()
    async with runtime:
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen_before + len(made_at_start)


async def test_a_collector_the_embedding_program_turned_off_stays_off(tmp_path: Path) -> None:
    gc.disable()
    pause_for_start()  # finds it off: nothing of its own to resume
    with paused():
        pass
    async with AgentRuntime(Settings(workspace=tmp_path, state_dir=tmp_path / "state"), llm=ScriptedLLM([])) as rt:
        await rt.prepare()
        assert not gc.isenabled()
    resume_after_start()
    assert not gc.isenabled()


def test_a_pause_for_an_import_ends_with_it_even_when_it_fails() -> None:
    with pytest.raises(ModuleNotFoundError), paused():
        assert not gc.isenabled()
        __import__("agent_server.no_such_module")
    assert gc.isenabled()
