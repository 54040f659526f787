"""One tool round inside `run_turn`, per round, versus one bare SDK `tools/call` round trip, paired.

agent-server side: one `python -m agent_server` process over stdio with a scripted model that asks for
`list_dir` on an empty directory N times (one call per model response) and then answers. A turn of N rounds
costs a fixed part (session lookup, system prompt, begin/finish in SQLite, the first and last model call,
the result) plus N times the per-round part, so two turn sizes measured back to back give the per-round
cost without the fixed part:

    per round = (T(run_turn, N=big) - T(run_turn, N=small)) / (big - small)

Each turn runs in a fresh session (created untimed just before), so history never accumulates across turns.
The figure is the *marginal* cost of a round in a turn of `small`..`big` rounds: it includes what grows with
the turn (the messages sent to the model, the turn record returned).

Baseline: `bench/baseline_server.py` (a bare SDK `MCPServer` with one tool, `echo`, a sync no-op run in a
worker thread like `list_dir`) over stdio, `calls` sequential `tools/call` round trips; per call = total /
calls. Both are driven by the same raw JSON-RPC client (no client SDK), both processes stay up for the whole
run, one unmeasured warm-up round first, then rounds alternate the order (agent first, then baseline first).
The headline is the ratio of the medians of the per-round figures.

    python bench/tool_round.py [--rounds 15] [--warmup 1] [--big 50] [--small 5] [--calls 50] [--json]

Each round measures `run_turn` twice over: with a progress token (as a client that shows progress sends; each
tool round then streams four events, so four `notifications/progress`, to the client) and without one (the
server's work alone). The headline ratio is the one with progress, the conservative one; both are printed.
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
    baseline_argv,
    goal_line,
    goal_met,
    loadavg,
    machine,
    machine_lines,
    write_script,
)

GOAL = 1.5
EMPTY_DIR = "empty"
TOOL_CALL = {"tool_calls": [{"name": "list_dir", "arguments": {"path": EMPTY_DIR}}]}
ANSWER = {"content": "done"}


def turn_sizes(rounds: int, warmup: int, big: int, small: int) -> list[tuple[int, int]]:
    """(first, second) turn sizes per round: big then small on even rounds, small then big on odd ones."""
    return [(big, small) if i % 2 == 0 else (small, big) for i in range(warmup + rounds)]


def script_for(sizes: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """The scripted model's responses for every turn of the run, in order (each pair is run twice)."""
    responses: list[dict[str, Any]] = []
    for pair in sizes:
        for n in [*pair, *pair]:
            responses += [TOOL_CALL] * n + [ANSWER]
    return responses


async def timed_turn(agent: RpcServer, n: int, progress: bool) -> tuple[float, int]:
    """(seconds for one run_turn of `n` tool rounds in a fresh session, progress notifications received)."""
    session = await agent.call_tool("session_create", {"title": f"bench {n}"})
    session_id = session["structuredContent"]["session_id"]
    seen = [0]

    def on_progress(_params: dict[str, Any]) -> None:
        seen[0] += 1

    args = {"prompt": "list the empty dir", "session_id": session_id, "max_tool_passes": n}
    start = time.perf_counter()
    result = await agent.call_tool("run_turn", args, on_progress=on_progress if progress else None)
    elapsed = time.perf_counter() - start
    record = result["structuredContent"]
    rounds = len({call["round"] for call in record["tool_calls"]})
    if record["status"] != "completed" or rounds != n:
        raise RuntimeError(f"turn of {n} rounds ended {record['status']} after {rounds} rounds")
    return elapsed, seen[0]


async def per_round(agent: RpcServer, pair: tuple[int, int], progress: bool) -> tuple[float, float]:
    """Per tool round: (seconds, progress notifications) as (big - small) / (big - small rounds).

    The two turns run back to back in the order of `pair`.
    """
    turns = {n: await timed_turn(agent, n, progress) for n in pair}
    big, small = max(pair), min(pair)
    seconds = (turns[big][0] - turns[small][0]) / (big - small)
    return seconds, (turns[big][1] - turns[small][1]) / (big - small)


async def timed_calls(baseline: RpcServer, calls: int) -> float:
    """Seconds per `tools/call` round trip, over `calls` sequential calls."""
    start = time.perf_counter()
    for _ in range(calls):
        await baseline.call_tool("echo", {"text": ""})
    return (time.perf_counter() - start) / calls


def _summary(agent: list[float], base: list[float]) -> dict[str, Any]:
    a, b = statistics.median(agent), statistics.median(base)
    paired = [x / y for x, y in zip(agent, base, strict=True)]
    return {
        "agent_server_per_round_s": [round(x, 6) for x in agent],
        "agent_server_median_s": round(a, 6),
        "ratio": round(a / b, 3),
        "paired_ratio_median": round(statistics.median(paired), 3),
        "goal_met": goal_met(a / b, GOAL),
    }


async def run(rounds: int, warmup: int, big: int, small: int, calls: int) -> dict[str, Any]:
    info = machine()
    sizes = turn_sizes(rounds, warmup, big, small)
    samples: dict[str, list[float]] = {"progress": [], "no_progress": [], "baseline": []}
    notifications: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-tool-round-") as tmp_name:
        tmp = Path(tmp_name)
        workspace = tmp / "workspace"
        (workspace / EMPTY_DIR).mkdir(parents=True)
        script = write_script(tmp / "script.json", script_for(sizes))
        agent_cmd = agent_argv(workspace, tmp / "state", script)
        async with (
            RpcServer.spawn(agent_cmd, tmp, name="agent-server") as agent,
            RpcServer.spawn(baseline_argv(), tmp, name="baseline") as baseline,
        ):
            await agent.request("tools/list")
            await baseline.request("tools/list")
            for i, pair in enumerate(sizes):
                round_samples: dict[str, float] = {}
                if i % 2 == 1:
                    round_samples["baseline"] = await timed_calls(baseline, calls)
                for progress in (True, False) if i % 2 == 0 else (False, True):
                    key = "progress" if progress else "no_progress"
                    round_samples[key], notes = await per_round(agent, pair, progress)
                    if progress and i >= warmup:
                        notifications.append(notes)
                if i % 2 == 0:
                    round_samples["baseline"] = await timed_calls(baseline, calls)
                if i >= warmup:
                    for key, value in round_samples.items():
                        samples[key].append(value)
    base_median = statistics.median(samples["baseline"])
    return {
        "measure": "one tool round inside run_turn, per round, vs one bare SDK tools/call round trip (stdio)",
        "method": f"(T(run_turn, {big} rounds) - T(run_turn, {small} rounds)) / {big - small}; "
        f"baseline {calls} sequential tools/call / {calls}",
        "rounds": rounds,
        "warmup": warmup,
        "big": big,
        "small": small,
        "calls": calls,
        "order": "alternating AB/BA per round; big/small and with/without progress order flipped too",
        "baseline_per_call_s": [round(x, 6) for x in samples["baseline"]],
        "baseline_median_s": round(base_median, 6),
        "with_progress": _summary(samples["progress"], samples["baseline"]),
        "progress_notifications_per_round": statistics.median(notifications),
        "without_progress": _summary(samples["no_progress"], samples["baseline"]),
        "ratio": _summary(samples["progress"], samples["baseline"])["ratio"],
        "goal": f"<= {GOAL} (headline: with progress)",
        "goal_met": _summary(samples["progress"], samples["baseline"])["goal_met"],
        **info,
        "loadavg_after": loadavg(),
    }


def render(r: dict[str, Any]) -> str:
    w, wo = r["with_progress"], r["without_progress"]
    return "\n".join(
        [
            r["measure"],
            f"method: {r['method']}",
            f"rounds: {r['rounds']} (+{r['warmup']} warm-up), {r['order']}",
            f"baseline per tools/call (median): {r['baseline_median_s'] * 1e6:.0f} us",
            f"agent-server per tool round, with progress (median): {w['agent_server_median_s'] * 1e6:.0f} us"
            f" ({r['progress_notifications_per_round']:g} progress notifications per round)",
            f"agent-server per tool round, without progress (median): {wo['agent_server_median_s'] * 1e6:.0f} us",
            f"ratio (agent-server / baseline), with progress: {w['ratio']:.2f}"
            f" (median of per-round ratios {w['paired_ratio_median']:.2f})",
            f"ratio (agent-server / baseline), without progress: {wo['ratio']:.2f}"
            f" (median of per-round ratios {wo['paired_ratio_median']:.2f})",
            goal_line(w["ratio"], GOAL) + " (with progress)",
            *machine_lines(r),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="measured rounds (default 15)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first (default 1)")
    parser.add_argument("--big", type=int, default=50, help="tool rounds in the long turn (default 50)")
    parser.add_argument("--small", type=int, default=5, help="tool rounds in the short turn (default 5)")
    parser.add_argument("--calls", type=int, default=50, help="baseline tools/call round trips per round (default 50)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0 or args.calls < 1 or not 0 <= args.small < args.big <= 1000:
        parser.error("need --rounds >= 1, --warmup >= 0, --calls >= 1 and 0 <= --small < --big <= 1000")
    result = anyio.run(run, args.rounds, args.warmup, args.big, args.small, args.calls)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
