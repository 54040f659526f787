"""Events streamed per second in a turn producing 10,000 token deltas, versus a bare SDK progress loop, paired.

agent-server side: `bench/_token_server.py`, the real server (`create_server(settings, llm=...)` served over
stdio) with a bench model that streams `--deltas` small deltas (`"tok "`) per answer, one event-loop checkpoint
between deltas, and coalescing on at the server's default `token_flush_interval_s` (0.05 s; `--flush` to
change). The client sends `tools/call run_turn` with a progress token, in a fresh session each time (created
untimed), and times it from sending the request to receiving the result, counting the `notifications/progress`
that arrive meanwhile.

Baseline: `bench/_progress_server.py`, a bare SDK `MCPServer` tool that sends `--deltas` progress notifications
in a loop (`ctx.report_progress`); same client, same timing.

With coalescing, one notification carries many deltas, so two rates are printed for agent-server:
**token deltas delivered per second** (the turn's deltas / the call's wall time: how fast the text reaches the
client) and notifications per second. The goal (>= 0.8x) compares the deltas delivered per second with the
baseline's notifications per second (one delta each): the issue's "events streamed per second ... with
coalescing on" read as the rate at which a turn's token deltas reach the client. `--events` also advertises
the `dev.agent-server/events` client extension and checks that the full token events carry every delta.

    python bench/token_stream.py [--rounds 7] [--deltas 10000] [--flush 0.05] [--events] [--json]
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
    BENCH_DIR,
    RpcServer,
    goal_line,
    goal_met,
    loadavg,
    machine,
    machine_lines,
)

GOAL = 0.8
DELTA = "tok "
EVENTS_EXTENSION = "dev.agent-server/events"
EVENT_METHOD = "notifications/agent_server/event"


def agent_cmd(tmp: Path, deltas: int, flush: float | None) -> list[str]:
    argv = [sys.executable, str(BENCH_DIR / "_token_server.py"), "--workspace", str(tmp / "workspace")]
    argv += ["--state-dir", str(tmp / "state"), "--deltas", str(deltas), "--delta", DELTA]
    return argv + ([] if flush is None else ["--flush", str(flush)])


async def timed_turn(agent: RpcServer, deltas: int, events: bool) -> dict[str, float]:
    created = await agent.call_tool("session_create", {"title": "bench tokens"})
    session_id = created["structuredContent"]["session_id"]
    counts = {"notifications": 0, "token_notifications": 0, "event_delta_chars": 0}

    def on_progress(params: dict[str, Any]) -> None:
        counts["notifications"] += 1
        if str(params.get("message", "")).startswith("text:"):
            counts["token_notifications"] += 1

    def on_event(message: dict[str, Any]) -> None:
        params = message.get("params", {})
        if message.get("method") == EVENT_METHOD and params.get("type") == "token":
            counts["event_delta_chars"] += len(params.get("delta", ""))

    agent.on_notification = on_event if events else None
    start = time.perf_counter()
    result = await agent.call_tool("run_turn", {"prompt": "stream", "session_id": session_id}, on_progress=on_progress)
    elapsed = time.perf_counter() - start
    record = result["structuredContent"]
    if record["status"] != "completed" or len(record["final_text"]) != deltas * len(DELTA):
        raise RuntimeError(f"turn ended {record['status']} with {len(record['final_text'])} characters")
    if counts["token_notifications"] < 1:
        raise RuntimeError("no token progress notification arrived")
    if events and counts["event_delta_chars"] != deltas * len(DELTA):
        raise RuntimeError(f"token events carried {counts['event_delta_chars']} of {deltas * len(DELTA)} characters")
    return {"seconds": elapsed, **counts}


async def timed_burst(baseline: RpcServer, deltas: int) -> dict[str, float]:
    seen = [0]

    def on_progress(_params: dict[str, Any]) -> None:
        seen[0] += 1

    start = time.perf_counter()
    await baseline.call_tool("burst", {"count": deltas, "message": DELTA}, on_progress=on_progress)
    elapsed = time.perf_counter() - start
    if seen[0] != deltas:
        raise RuntimeError(f"baseline: {seen[0]} of {deltas} progress notifications arrived")
    return {"seconds": elapsed, "notifications": seen[0]}


async def run(rounds: int, warmup: int, deltas: int, flush: float | None, events: bool) -> dict[str, Any]:
    info = machine()
    agent_samples: list[dict[str, float]] = []
    base_samples: list[dict[str, float]] = []
    capabilities: dict[str, Any] | None = {"extensions": {EVENTS_EXTENSION: {}}} if events else None
    with tempfile.TemporaryDirectory(prefix="bench-tokens-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "workspace").mkdir()
        baseline_cmd = [sys.executable, str(BENCH_DIR / "_progress_server.py")]
        async with (
            RpcServer.spawn(
                agent_cmd(tmp, deltas, flush), tmp, name="agent-server", capabilities=capabilities
            ) as agent,
            RpcServer.spawn(baseline_cmd, tmp, name="baseline") as baseline,
        ):
            await agent.request("tools/list")
            await baseline.request("tools/list")
            for i in range(warmup + rounds):
                if i % 2 == 0:
                    a = await timed_turn(agent, deltas, events)
                    b = await timed_burst(baseline, deltas)
                else:
                    b = await timed_burst(baseline, deltas)
                    a = await timed_turn(agent, deltas, events)
                if i >= warmup:
                    agent_samples.append(a)
                    base_samples.append(b)
    agent_deltas = [deltas / s["seconds"] for s in agent_samples]
    agent_notes = [s["notifications"] / s["seconds"] for s in agent_samples]
    base_rate = [s["notifications"] / s["seconds"] for s in base_samples]
    medians = {
        "agent_deltas_per_s": statistics.median(agent_deltas),
        "agent_notifications_per_s": statistics.median(agent_notes),
        "baseline_notifications_per_s": statistics.median(base_rate),
    }
    ratio = medians["agent_deltas_per_s"] / medians["baseline_notifications_per_s"]
    paired = [a / b for a, b in zip(agent_deltas, base_rate, strict=True)]
    return {
        "measure": f"token events streamed per second in a turn of {deltas} deltas vs a bare SDK progress loop (stdio)",
        "rounds": rounds,
        "warmup": warmup,
        "deltas": deltas,
        "flush_interval_s": 0.05 if flush is None else flush,
        "events_extension": events,
        "order": "alternating AB/BA per round",
        "agent_server_s": [round(s["seconds"], 4) for s in agent_samples],
        "baseline_s": [round(s["seconds"], 4) for s in base_samples],
        "agent_notifications": [int(s["notifications"]) for s in agent_samples],
        "agent_token_notifications": [int(s["token_notifications"]) for s in agent_samples],
        **{key: round(value, 1) for key, value in medians.items()},
        "ratio": round(ratio, 3),
        "paired_ratio_median": round(statistics.median(paired), 3),
        "notifications_ratio": round(medians["agent_notifications_per_s"] / medians["baseline_notifications_per_s"], 4),
        "goal": f">= {GOAL} (deltas delivered/s vs baseline notifications/s)",
        "goal_met": goal_met(ratio, GOAL, at_most=False),
        **info,
        "loadavg_after": loadavg(),
    }


def render(r: dict[str, Any]) -> str:
    token_notes = statistics.median(r["agent_token_notifications"])
    return "\n".join(
        [
            r["measure"],
            f"rounds: {r['rounds']} (+{r['warmup']} warm-up), {r['order']}; coalescing every"
            f" {r['flush_interval_s']:g} s; events extension: {'yes' if r['events_extension'] else 'no'}",
            f"agent-server token deltas delivered/s (median): {r['agent_deltas_per_s']:.0f}"
            f" (turn wall median {statistics.median(r['agent_server_s']) * 1000:.0f} ms)",
            f"agent-server notifications/s (median): {r['agent_notifications_per_s']:.0f}"
            f" ({token_notes:.0f} token notifications per turn, median)",
            f"baseline notifications/s (median): {r['baseline_notifications_per_s']:.0f}"
            f" (wall median {statistics.median(r['baseline_s']) * 1000:.0f} ms)",
            f"ratio (agent-server deltas/s / baseline notifications/s): {r['ratio']:.2f}",
            f"median of per-round ratios: {r['paired_ratio_median']:.2f}",
            f"notifications/s ratio, for context: {r['notifications_ratio']:.3f}",
            goal_line(r["ratio"], GOAL, at_most=False) + " (deltas delivered/s)",
            *machine_lines(r),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="measured rounds (default 7)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first (default 1)")
    parser.add_argument("--deltas", type=int, default=10_000, help="token deltas per turn (default 10000)")
    parser.add_argument("--flush", type=float, default=None, help="token_flush_interval_s (default: the server's)")
    parser.add_argument("--events", action="store_true", help="also take the full events (client extension)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0 or args.deltas < 1 or (args.flush is not None and args.flush < 0):
        parser.error("need --rounds >= 1, --warmup >= 0, --deltas >= 1 and --flush >= 0")
    result = anyio.run(run, args.rounds, args.warmup, args.deltas, args.flush, args.events)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
