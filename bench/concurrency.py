"""8 concurrent turns on 8 sessions with a scripted model delay L: wall time versus L itself, paired.

One `python -m agent_server` process over stdio; its scripted model answers every call after `delay_s` = L.
The 8 sessions are created first (untimed). Each round then times, from one raw JSON-RPC client on the one
connection, 8 `tools/call run_turn` requests sent at once (one per session, each with a progress token, as a
client showing progress sends) until the last result arrives, and, side by side in the same round, the wall
time of `anyio.sleep(L)` in the client (the baseline: what the wait alone costs on this machine right now).
The order alternates every round. For context it also times one turn alone. Figure: median wall of the 8 / median
sleep wall, i.e. the 8-turn wall in units of L. Goal: <= 1.3 (8 turns overlap; the server adds little).

    python bench/concurrency.py [--rounds 7] [--turns 8] [--delay 0.5] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _jsonrpc import (  # noqa: E402
    RpcServer,
    agent_argv,
    goal_line,
    goal_met,
    loadavg,
    machine,
    machine_lines,
    write_script,
)

GOAL = 1.3


async def timed_turns(agent: RpcServer, sessions: list[str]) -> float:
    """Wall seconds for one run_turn per session, all sent at once."""
    statuses: list[str] = []

    async def one(session_id: str) -> None:
        args = {"prompt": "say ok", "session_id": session_id}
        result = await agent.call_tool("run_turn", args, on_progress=lambda _p: None)
        statuses.append(result["structuredContent"]["status"])

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for session_id in sessions:
            tg.start_soon(one, session_id)
    elapsed = time.perf_counter() - start
    if statuses != ["completed"] * len(sessions):
        raise RuntimeError(f"turns ended {statuses}")
    return elapsed


async def timed_sleep(delay: float) -> float:
    start = time.perf_counter()
    await anyio.sleep(delay)
    return time.perf_counter() - start


async def run(rounds: int, warmup: int, turns: int, delay: float) -> dict[str, Any]:
    info = machine()
    walls: dict[str, list[float]] = {"turns": [], "sleep": [], "one": []}
    with tempfile.TemporaryDirectory(prefix="bench-concurrency-") as tmp_name:
        tmp = Path(tmp_name)
        workspace = tmp / "workspace"
        workspace.mkdir()
        calls = (warmup + rounds) * (turns + 1)
        script = write_script(tmp / "script.json", [{"content": "ok", "delay_s": delay}] * calls)
        async with RpcServer.spawn(agent_argv(workspace, tmp / "state", script), tmp, name="agent-server") as agent:
            await agent.request("tools/list")
            sessions: list[str] = []
            for i in range(turns):
                created = await agent.call_tool("session_create", {"title": f"bench {i}"})
                sessions.append(created["structuredContent"]["session_id"])
            for i in range(warmup + rounds):
                if i % 2 == 0:
                    sample = {"turns": await timed_turns(agent, sessions), "sleep": await timed_sleep(delay)}
                else:
                    sample = {"sleep": await timed_sleep(delay), "turns": await timed_turns(agent, sessions)}
                sample["one"] = await timed_turns(agent, sessions[:1])
                if i >= warmup:
                    for key, value in sample.items():
                        walls[key].append(value)
    medians = {key: statistics.median(values) for key, values in walls.items()}
    ratio = medians["turns"] / medians["sleep"]
    paired = [t / s for t, s in zip(walls["turns"], walls["sleep"], strict=True)]
    return {
        "measure": f"{turns} concurrent run_turn on {turns} sessions, scripted model delay L (stdio, one connection)",
        "rounds": rounds,
        "warmup": warmup,
        "turns": turns,
        "delay_s": delay,
        "order": "alternating turns/sleep first per round; one turn alone after each round",
        "turns_wall_s": [round(x, 4) for x in walls["turns"]],
        "sleep_wall_s": [round(x, 4) for x in walls["sleep"]],
        "one_turn_wall_s": [round(x, 4) for x in walls["one"]],
        "turns_median_s": round(medians["turns"], 4),
        "sleep_median_s": round(medians["sleep"], 4),
        "one_turn_median_s": round(medians["one"], 4),
        "ratio": round(ratio, 3),
        "one_turn_ratio": round(medians["one"] / medians["sleep"], 3),
        "paired_ratio_median": round(statistics.median(paired), 3),
        "goal": f"<= {GOAL}",
        "goal_met": goal_met(ratio, GOAL),
        **info,
        "loadavg_after": loadavg(),
    }


def render(r: dict[str, Any]) -> str:
    return "\n".join(
        [
            r["measure"],
            f"rounds: {r['rounds']} (+{r['warmup']} warm-up), L = {r['delay_s']:g} s, {r['order']}",
            f"{r['turns']} concurrent turns wall (median): {r['turns_median_s'] * 1000:.0f} ms",
            f"baseline anyio.sleep(L) wall (median): {r['sleep_median_s'] * 1000:.0f} ms",
            f"ratio (turns wall / L): {r['ratio']:.2f}",
            f"median of per-round ratios: {r['paired_ratio_median']:.2f}",
            f"one turn alone wall / L: {r['one_turn_ratio']:.2f} ({r['one_turn_median_s'] * 1000:.0f} ms)",
            goal_line(r["ratio"], GOAL),
            *machine_lines(r),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="measured rounds (default 7)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first (default 1)")
    parser.add_argument("--turns", type=int, default=8, help="concurrent turns, one per session (default 8)")
    parser.add_argument("--delay", type=float, default=0.5, help="scripted model delay L in seconds (default 0.5)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0 or args.turns < 1 or args.delay <= 0:
        parser.error("need --rounds >= 1, --warmup >= 0, --turns >= 1 and --delay > 0")
    result = anyio.run(run, args.rounds, args.warmup, args.turns, args.delay)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
