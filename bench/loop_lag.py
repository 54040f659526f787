"""The event loop's lag while turns run: the rule "nothing holds the event loop for more than 1 ms", measured.

A ticker task sleeps 1 ms at a time on the server's event loop and records how late each wake-up is (the lag: the
time the loop was held by something else, plus the scheduler's own latency). While it ticks, each round runs
`--turns` (default 8) concurrent `AgentRuntime.run_turn` calls on their own sessions, each with one tool round of
two calls: the built-in `list_dir` and `fake__echo` on a mounted MCP server (`tests/fakes/mcp_echo.py`, a child
process over stdio), then the answer. Meanwhile a second process on the same state dir runs turns in a loop
(`--other`, default on), so the SQLite store meets a write lock held by another process (`SQLITE_BUSY`, then a
retry in a worker thread) as two editor windows on one workspace would.

Two variants, one after the other in the same process: `plain`, and `hostile`, where one of the turns' model
responses carries a crafted tool-call argument of about `--hostile-kb` KiB (default 1,024) of small nested values
(the shape that makes the argument checks walk the most), as a provider hands it over after parsing it.

The model is a bench-only in-process fake (no provider, no parsing: the provider's own cost is not the turn's).
Figures: p50, p99 and max of the lag over all ticks of a variant (after one warm-up round); goal p99 <= 1 ms and
max <= 5 ms. Absolute times, since the rule is one; the load average is printed beside them. On a loaded machine
the ticker's lag also holds the time the process waited for a core (the kernel's scheduling, not the loop being
held), so beside it the bench times every event-loop callback (`asyncio.Handle._run`) in CPU time of the loop's
thread (`time.thread_time`): how long agent-server's own code held the loop, whatever the load. The goal applies
to the ticker; the CPU figure says, when it is missed, whether the code or the machine missed it (and the
callbacks that held the loop longest are named).

The process hands the GIL over as the server's does (`--switch-interval`, default `cli.GIL_SWITCH_INTERVAL_S`).

    python bench/loop_lag.py [--rounds 20] [--turns 8] [--hostile-kb 1024] [--no-other] [--switch-interval S] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import asyncio.events
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
import anyio.lowlevel
from _jsonrpc import loadavg, machine, machine_lines  # noqa: E402

from agent_server import AgentRuntime, Settings, TurnOptions  # noqa: E402
from agent_server.cli import GIL_SWITCH_INTERVAL_S  # noqa: E402
from agent_server.llm.base import ModelRequest, ModelResponse  # noqa: E402
from agent_server.types import ToolCall  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
FAKE_SERVER = REPO / "tests" / "fakes" / "mcp_echo.py"
TICK_S = 0.001
GOAL_P99_MS = 1.0
GOAL_MAX_MS = 5.0

OTHER_PROCESS = textwrap.dedent(
    """
    import sys, anyio
    from pathlib import Path
    from agent_server import AgentRuntime, Settings, TurnOptions
    from agent_server.testing import ScriptedLLM

    TURN = [{"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]}, {"content": "done"}]

    async def main():
        settings = Settings(workspace=Path(sys.argv[1]), state_dir=Path(sys.argv[2]))
        async with AgentRuntime(settings, llm=ScriptedLLM(TURN * 1_000_000)) as runtime:
            sys.stdout.write("ready\\n")
            sys.stdout.flush()
            while True:
                await runtime.run_turn("other", session_id="new", options=TurnOptions(max_tool_passes=1))
                await anyio.sleep(0.002)

    anyio.run(main)
    """
)


def crafted_arguments(kib: int) -> dict[str, Any]:
    """About `kib` KiB of JSON as many tiny nested values (wide and a little deep)."""
    item = {"k": [1, {"v": "x"}]}  # about 20 characters of JSON
    return {"path": ".", "payload": [item] * (kib * 1024 // 20)}


class BenchModel:
    """Asks for `list_dir` and the mounted `fake__echo` once per turn, then answers; `hostile` responses carry
    `crafted` arguments."""

    name = "bench"

    def __init__(self, crafted: dict[str, Any]) -> None:
        self.hostile_left = 0
        self._plain = self._calls({"path": "."})
        self._hostile = self._calls(crafted)  # built once, ahead: a provider's parse is not the turn's work

    @staticmethod
    def _calls(arguments: dict[str, Any]) -> ModelResponse:
        calls = [
            ToolCall(id="c1", name="list_dir", arguments=arguments),
            ToolCall(id="c2", name="fake__echo", arguments={"text": "hi"}),
        ]
        return ModelResponse(tool_calls=calls)

    async def complete(self, request: ModelRequest, *, on_text: Any = None, on_retry: Any = None) -> ModelResponse:
        await anyio.lowlevel.checkpoint()  # a provider awaits its response
        if request.messages[-1].role == "tool":
            return ModelResponse(text="done")
        if self.hostile_left > 0:
            self.hostile_left -= 1
            return self._hostile
        return self._plain


class Ticker:
    """The 1 ms ticker, and every event-loop callback's CPU time while `on`."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self.held: list[float] = []
        self.longest: list[tuple[float, str]] = []
        self.on = False
        self._patch()

    def _patch(self) -> None:
        shipped = asyncio.events.Handle._run  # pyright: ignore[reportPrivateUsage]
        ticker = self

        def timed(handle: asyncio.events.Handle) -> None:
            if not ticker.on:
                return shipped(handle)
            start = time.thread_time()
            try:
                return shipped(handle)
            finally:
                held = time.thread_time() - start
                ticker.held.append(held)
                if held > 0.0005:
                    ticker.longest.append((held, _where(handle)))

        asyncio.events.Handle._run = timed  # type: ignore[method-assign]

    async def run(self) -> None:
        while True:
            start = time.perf_counter()
            await anyio.sleep(TICK_S)
            if self.on:
                self.lags.append(max(0.0, time.perf_counter() - start - TICK_S))


def _where(handle: asyncio.events.Handle) -> str:
    """The task a callback stepped, by the innermost coroutine it now waits in (where the step ended)."""
    callback = getattr(handle, "_callback", None)
    task: object = getattr(callback, "__self__", None)
    if not isinstance(task, asyncio.Task):
        return repr(handle)[:160]
    coro: Any = task.get_coro()  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    names: list[str] = []
    while coro is not None and len(names) < 12:
        code = getattr(coro, "cr_code", None) or getattr(coro, "gi_code", None)
        if code is not None:
            names.append(code.co_qualname)
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return " > ".join(names[-4:]) or repr(handle)[:160]


async def _round(runtime: AgentRuntime, turns: int) -> None:
    async def one() -> None:
        record = await runtime.run_turn("go", session_id="new", options=TurnOptions(max_tool_passes=1))
        if record.status != "completed" or len(record.tool_rounds) != 1:
            raise RuntimeError(f"turn ended {record.status}: {record.error}")

    async with anyio.create_task_group() as tg:
        for _ in range(turns):
            tg.start_soon(one)


async def _variant(
    runtime: AgentRuntime, model: BenchModel, ticker: Ticker, args: argparse.Namespace, hostile: bool
) -> dict[str, Any]:
    await _round(runtime, args.turns)  # warm-up
    ticker.lags, ticker.held, ticker.longest = [], [], []
    ticker.on = True
    for _ in range(args.rounds):
        model.hostile_left = 1 if hostile else 0
        await _round(runtime, args.turns)
    ticker.on = False
    longest = sorted(ticker.longest, reverse=True)[:3]
    return {
        **_summary(ticker.lags),
        "held_cpu": _summary(ticker.held),
        "longest": [f"{held * 1000:.2f} ms {what}" for held, what in longest],
    }


def _summary(values: list[float]) -> dict[str, float]:
    ms = sorted(value * 1000 for value in values)
    return {
        "ticks": len(ms),
        "p50_ms": round(statistics.median(ms), 3),
        "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 3),
        "max_ms": round(ms[-1], 3),
    }


def _start_other(workspace: Path, state: Path) -> subprocess.Popen[bytes]:
    """The second process on the state dir, once its store is open."""
    other = subprocess.Popen([sys.executable, "-c", OTHER_PROCESS, str(workspace), str(state)], stdout=subprocess.PIPE)
    assert other.stdout is not None
    other.stdout.readline()  # "ready"
    return other


def _settings(workspace: Path, state: Path) -> Settings:
    servers = {"fake": {"command": sys.executable, "args": [str(FAKE_SERVER)]}}
    return Settings.model_validate(
        {
            "workspace": workspace,
            "state_dir": state,
            "mcpServers": servers,
            "approvals": {"tools": {"fake__*": "allow"}},
        }
    )


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    info = machine()
    with tempfile.TemporaryDirectory(prefix="bench-lag-") as tmp_name:
        tmp = Path(tmp_name)
        workspace, state = tmp / "workspace", tmp / "state"
        workspace.mkdir()
        other = _start_other(workspace, state) if args.other else None
        plain: dict[str, Any] = {}
        hostile: dict[str, Any] = {}
        try:
            model = BenchModel(crafted_arguments(args.hostile_kb))
            ticker = Ticker()
            async with AgentRuntime(_settings(workspace, state), llm=model) as runtime:
                await runtime.prepare()  # as every front door does once it has answered the handshake
                async with anyio.create_task_group() as tg:
                    tg.start_soon(ticker.run)
                    plain = await _variant(runtime, model, ticker, args, hostile=False)
                    hostile = await _variant(runtime, model, ticker, args, hostile=True)
                    tg.cancel_scope.cancel()
        finally:
            if other is not None:
                other.kill()
                other.wait()
    return {
        "measure": "event-loop lag (1 ms ticker) during concurrent turns with a built-in and a mounted call",
        "rounds": args.rounds,
        "turns_per_round": args.turns,
        "other_process": args.other,
        "hostile_kib": args.hostile_kb,
        "switch_interval_s": sys.getswitchinterval(),
        "plain": plain,
        "hostile": hostile,
        "met": all(_met(v) for v in (plain, hostile)),
        **info,
        "loadavg_after": loadavg(),
    }


def _met(variant: dict[str, Any]) -> bool:
    return variant["p99_ms"] <= GOAL_P99_MS and variant["max_ms"] <= GOAL_MAX_MS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=1, help="accepted for run_all; one warm-up round per variant")
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--hostile-kb", type=int, default=1024)
    parser.add_argument("--no-other", dest="other", action="store_false", help="no second process on the state dir")
    parser.add_argument(
        "--switch-interval",
        type=float,
        default=GIL_SWITCH_INTERVAL_S,
        help=f"seconds, sys.setswitchinterval (default {GIL_SWITCH_INTERVAL_S:g}, the server process's own)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sys.setswitchinterval(args.switch_interval)  # as `python -m agent_server` sets it for its process
    result = anyio.run(measure, args)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(result["measure"])
    other = "a second process running turns on the same state dir" if args.other else "no second process"
    print(f"rounds: {args.rounds} x {args.turns} concurrent turns per variant (+1 warm-up); {other}")
    print(f"GIL switch interval: {result['switch_interval_s'] * 1e3:g} ms")
    for name in ("plain", "hostile"):
        v = result[name]
        label = "plain turns" if name == "plain" else f"one turn a round with a {args.hostile_kb} KiB crafted argument"
        print(f"lag, {label}: p50 {v['p50_ms']} ms, p99 {v['p99_ms']} ms, max {v['max_ms']} ms ({v['ticks']} ticks)")
        h = v["held_cpu"]
        print(f"  loop held per callback (CPU): p50 {h['p50_ms']} ms, p99 {h['p99_ms']} ms, max {h['max_ms']} ms")
        for line in v["longest"]:
            print(f"    {line}")
    print(f"goal: p99 <= {GOAL_P99_MS} ms and max <= {GOAL_MAX_MS} ms: {'met' if result['met'] else 'NOT met'}")
    for line in machine_lines(result):
        print(line)


if __name__ == "__main__":
    main()
