"""The latency the approval gate adds to a call it lets through: a whole turn, gate versus no gate, paired.

In process, through `AgentRuntime.run_turn` (the library surface every front door uses) with a scripted
model: each turn asks for one `list_dir` of an empty directory, then answers. Three runtimes, each with its
own store in a temp dir, differ only in the approvals policy:

* `off`: `list_dir` is read-only, so the gate lets it through without a lookup (the baseline).
* `remembered`: the policy says `ask` for `list_dir`; the session's `allow_session` is remembered (asked once,
  in the untimed priming turn), so every timed call takes the gate's remembered path (policy, store lookup
  once per turn, an `ApprovalRecord` in the stored record).
* `asked`: the policy says `ask` and the turn's channel answers `allow_once` at once (an in-process channel:
  the gate's own cost of asking, without a user or a wire).

Method (bench/README.md): every round measures all three, in an order that rotates each round; each figure is
the median over the rounds of the per-turn time of a block of `--turns` turns in a fresh session (primed by
one untimed turn, so the history stays short and alike on every side); the headline is the ratio of the
medians to `off`.

    python bench/approval_gate.py [--rounds 15] [--turns 20] [--warmup 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _jsonrpc import goal_line, goal_met, loadavg, machine, machine_lines  # noqa: E402

from agent_server import AgentRuntime, Settings, TurnOptions  # noqa: E402
from agent_server.approvals import ApprovalRequest, Decision, ElicitationAnswer, ElicitationRequest  # noqa: E402
from agent_server.testing import ScriptedLLM  # noqa: E402

GOAL = 1.1
SIDES = ("off", "remembered", "asked")
TURN = [{"tool_calls": [{"name": "list_dir", "arguments": {"path": "empty"}}]}, {"content": "done"}]


class InstantChannel:
    """Answers every approval request at once."""

    name = "bench"

    def __init__(self, choice: str) -> None:
        self.decision = Decision("allow_session" if choice == "allow_session" else "allow_once")

    async def ask(self, request: ApprovalRequest) -> Decision:
        return self.decision

    async def elicit(self, request: ElicitationRequest) -> ElicitationAnswer:
        return ElicitationAnswer("decline")


def _settings(root: Path, side: str) -> Settings:
    workspace = root / side / "ws"
    (workspace / "empty").mkdir(parents=True)
    approvals: dict[str, Any] = {} if side == "off" else {"tools": {"list_dir": "ask"}}
    return Settings(workspace=workspace, state_dir=root / side / "state", approvals=approvals)


async def measure(rounds: int, turns: int, warmup: int) -> dict[str, Any]:
    before = machine()
    total_turns = (rounds + warmup) * (turns + 1)
    with tempfile.TemporaryDirectory() as tmp:
        async with AsyncExitStack() as stack:
            runtimes: dict[str, AgentRuntime] = {}
            for side in SIDES:
                llm = ScriptedLLM(TURN * total_turns)
                runtimes[side] = await stack.enter_async_context(AgentRuntime(_settings(Path(tmp), side), llm=llm))
            samples: dict[str, list[float]] = {side: [] for side in SIDES}
            for n in range(warmup + rounds):
                order = SIDES[n % 3 :] + SIDES[: n % 3]
                for side in order:
                    runtime = runtimes[side]
                    session = await _primed_session(runtime, side)
                    start = time.perf_counter()
                    for _ in range(turns):
                        await _turn(runtime, session, CHANNELS[side], check=side)
                    if n >= warmup:
                        samples[side].append((time.perf_counter() - start) / turns)
    medians = {side: statistics.median(values) for side, values in samples.items()}
    return {
        "rounds": rounds,
        "turns_per_block": turns,
        "median_us": {side: round(value * 1e6, 1) for side, value in medians.items()},
        "ratio_remembered": round(medians["remembered"] / medians["off"], 3),
        "ratio_asked": round(medians["asked"] / medians["off"], 3),
        "goal": GOAL,
        "goal_met": goal_met(medians["remembered"] / medians["off"], GOAL),
        **before,
        "loadavg_after": loadavg(),
    }


CHANNELS: dict[str, InstantChannel | None] = {
    "off": None,
    "remembered": InstantChannel("allow_once"),  # never asked: the session remembers
    "asked": InstantChannel("allow_once"),
}


async def _primed_session(runtime: AgentRuntime, side: str) -> str:
    """A fresh session (so history stays short and alike on every side) after one untimed turn; on the
    remembered side that turn is answered `allow_session`, which the session then remembers."""
    session = (await runtime.create_session(title=side)).session_id
    await _turn(runtime, session, InstantChannel("allow_session") if side == "remembered" else CHANNELS[side])
    return session


async def _turn(runtime: AgentRuntime, session: str, channel: Any, check: str | None = None) -> None:
    record = await runtime.run_turn("list it", session_id=session, options=TurnOptions(approvals=channel))
    ran = record.tool_rounds and not record.tool_rounds[0].tool_results[0].is_error
    if record.status != "completed" or not ran:
        raise RuntimeError(f"the turn went wrong: {record.status} {record.tool_rounds}")
    expected = {"off": [], "remembered": ["remembered"], "asked": ["allow_once"]}
    if check is not None and [a.decision for a in record.approvals] != expected[check]:
        raise RuntimeError(f"{check}: the gate did not take the measured path: {record.approvals}")


def render(r: dict[str, Any]) -> str:
    us = r["median_us"]
    lines = [
        f"an allowed call through the approval gate, per whole run_turn ({r['rounds']} rounds x "
        f"{r['turns_per_block']} turns)",
        f"  gate off (read-only tool), per turn (median): {us['off']:,.0f} us",
        f"  remembered allow_session, per turn (median): {us['remembered']:,.0f} us",
        f"  asked, answered allow_once at once, per turn (median): {us['asked']:,.0f} us",
        f"  ratio (remembered / off): {r['ratio_remembered']:.3f}",
        f"  ratio (asked / off): {r['ratio_asked']:.3f}",
        f"  {goal_line(r['ratio_remembered'], GOAL)}",
        *machine_lines(r),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.turns < 1 or args.warmup < 0:
        parser.error("--rounds and --turns must be >= 1, --warmup >= 0")
    result = anyio.run(measure, args.rounds, args.turns, args.warmup)
    print(json.dumps(result, indent=2) if args.json else render(result))


if __name__ == "__main__":
    main()
