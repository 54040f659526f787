"""Relayed progress from a mounted server versus the same server's progress received directly, paired; and RSS.

agent-server side: one `python -m agent_server ... --mcp-config CONFIG` process over stdio with
`tests/fakes/mcp_echo.py` mounted as `fake`, driven by the raw JSON-RPC client of `_jsonrpc.py`. Each turn (in a
fresh session, created untimed) has a scripted model that calls `fake__burst {"n": N}` (the fake server sends N
`notifications/progress` as fast as it can) and then answers. The outer caller's progress callback gets the
turn's events as progress messages: `fake__burst: started`, one `fake__burst: tick K` per relayed progress
value, `fake__burst: ok in ...`. The span timed is from the `started` message's arrival to the `ok` message's
arrival: the mounted call as the outer caller sees it.

Baseline: an `mcp.Client` (stdio, mode `auto` like the mounts) to a separate process of the same fake server,
`call_tool("burst", {"n": N}, progress_callback=...)`, timed from the call to its return.

agent-server coalesces a mounted call's progress by design (at most about 10 notifications per second per call,
the latest value winning, so that a burst cannot grow memory without bound), so its raw notifications/s is
~10/s by construction. Two rates are therefore printed for each side:

* **notifications/s**: progress notifications received / span (for the relay, only the `tick` ones);
* **progress units per second**: how fast the burst's progress value advances as the receiver sees it, the
  last progress value received / span. The goal (>= 0.5x) is compared on this one: it is the information a
  progress bar shows, and coalescing keeps all of it (the latest value) while dropping the intermediate steps.

RSS: VmRSS of the agent server process (`/proc/<pid>/status`) once the mount is ready (before any turn: the
start), after one turn with a plain `fake__echo` call (context: what any first turn allocates), then after
every burst turn (the warm-up one included). Goal: the last value within 10 MiB of the start.

One unmeasured warm-up round first; then each round runs the relay and the direct burst, the order flipping
every round. Figures are medians over the rounds.

    python bench/relay_progress.py [--rounds 7] [--warmup 1] [--n 5000] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _jsonrpc import (  # noqa: E402
    RpcServer,
    agent_argv,
    goal_line,
    goal_met,
    loadavg,
    machine,
    machine_lines,
    vm_rss_kib,
    write_script,
)
from _mount_common import (  # noqa: E402
    MODE,
    allow_mounted,
    direct_client,
    mount_config,
    mounted,
    new_session,
    wait_mount_ready,
)

GOAL = 0.5
RSS_GOAL_MIB = 10.0
BURST = mounted("burst")
TICK = re.compile(rf"^{re.escape(BURST)}: tick (\d+)$")
ANSWER = {"content": "done"}
ECHO_TURN = [{"tool_calls": [{"name": mounted("echo"), "arguments": {"text": "warm"}}]}, ANSWER]

RELAY = "relay"
DIRECT = "direct"


@dataclass
class Burst:
    seconds: float
    notifications: int
    last_value: float

    @property
    def notifications_per_s(self) -> float:
        return self.notifications / self.seconds

    @property
    def units_per_s(self) -> float:
        return self.last_value / self.seconds


def script_for(bursts: int, n: int) -> list[dict[str, Any]]:
    burst_turn = [{"tool_calls": [{"name": BURST, "arguments": {"n": n}}]}, ANSWER]
    return ECHO_TURN + burst_turn * bursts


async def relayed_burst(agent: RpcServer, n: int) -> tuple[Burst, float]:
    """(the burst as the outer run_turn caller sees it, the whole run_turn's seconds)."""
    session_id = await new_session(agent, "bench relay")
    marks: dict[str, float] = {}
    ticks = [0]
    last = [0.0]

    def on_progress(params: dict[str, Any]) -> None:
        now = time.perf_counter()
        message = str(params.get("message", ""))
        if (match := TICK.match(message)) is not None:
            ticks[0] += 1
            last[0] = max(last[0], float(match.group(1)))
        elif message == f"{BURST}: started":
            marks["started"] = now
        elif message.startswith(f"{BURST}: ok in "):
            marks["ended"] = now

    start = time.perf_counter()
    result = await agent.call_tool(
        "run_turn", {"prompt": "burst", "session_id": session_id, "detail": "full"}, on_progress=on_progress
    )
    whole = time.perf_counter() - start
    record = result["structuredContent"]
    rounds = record["tool_rounds"]
    if record["status"] != "completed" or len(rounds) != 1 or rounds[0]["tool_results"][0]["is_error"]:
        raise RuntimeError(f"burst turn ended {record['status']}: {rounds or record.get('error')}")
    if set(marks) != {"started", "ended"}:
        raise RuntimeError(f"missing the call's start or end message: {marks}")
    return Burst(marks["ended"] - marks["started"], ticks[0], last[0]), whole


async def direct_burst(client: Client, n: int) -> Burst:
    count = [0]
    last = [0.0]

    async def on_progress(progress: float, _total: float | None, _message: str | None) -> None:
        count[0] += 1
        last[0] = max(last[0], progress)

    start = time.perf_counter()
    result = await client.call_tool("burst", {"n": n}, progress_callback=on_progress)
    elapsed = time.perf_counter() - start
    if result.is_error:
        raise RuntimeError(f"direct burst failed: {result.content}")
    return Burst(elapsed, count[0], last[0])


def rss_mib(pid: int) -> float:
    return vm_rss_kib(pid) / 1024


async def run(rounds: int, warmup: int, n: int) -> dict[str, Any]:
    info = machine()
    samples: dict[str, list[Burst]] = {RELAY: [], DIRECT: []}
    turn_s: list[float] = []
    rss: dict[str, Any] = {"after_bursts_mib": []}
    with tempfile.TemporaryDirectory(prefix="bench-relay-progress-") as tmp_name:
        tmp = Path(tmp_name)
        workspace = tmp / "workspace"
        workspace.mkdir()
        script = write_script(tmp / "script.json", script_for(warmup + rounds, n))
        config = mount_config(tmp / "mcp.json")
        agent_cmd = agent_argv(
            workspace, tmp / "state", script, "--mcp-config", str(config), *allow_mounted(tmp / "settings.json")
        )
        async with RpcServer.spawn(agent_cmd, tmp, name="agent-server") as agent, direct_client() as client:
            await wait_mount_ready(agent)
            rss["start_mib"] = rss_mib(agent.pid)
            session_id = await new_session(agent, "bench relay warm")
            await agent.call_tool("run_turn", {"prompt": "warm", "session_id": session_id})
            rss["after_echo_turn_mib"] = rss_mib(agent.pid)
            for i in range(warmup + rounds):
                values: dict[str, Burst] = {}
                for side in (RELAY, DIRECT) if i % 2 == 0 else (DIRECT, RELAY):
                    if side == RELAY:
                        values[side], whole = await relayed_burst(agent, n)
                        rss["after_bursts_mib"].append(rss_mib(agent.pid))
                    else:
                        values[side] = await direct_burst(client, n)
                if i >= warmup:
                    turn_s.append(whole)
                    for side, value in values.items():
                        samples[side].append(value)
            protocol = client.protocol_version
            rss["pid"] = agent.pid
    return summarize(samples, turn_s, rss, rounds, warmup, n, protocol) | info | {"loadavg_after": loadavg()}


def _side(bursts: list[Burst]) -> dict[str, Any]:
    return {
        "seconds": [round(b.seconds, 4) for b in bursts],
        "notifications": [b.notifications for b in bursts],
        "last_values": [b.last_value for b in bursts],
        "median_s": round(statistics.median(b.seconds for b in bursts), 4),
        "notifications_per_s": round(statistics.median(b.notifications_per_s for b in bursts), 1),
        "units_per_s": round(statistics.median(b.units_per_s for b in bursts), 1),
        "median_notifications": statistics.median(b.notifications for b in bursts),
        "median_last_value": statistics.median(b.last_value for b in bursts),
    }


def summarize(
    samples: dict[str, list[Burst]],
    turn_s: list[float],
    rss: dict[str, Any],
    rounds: int,
    warmup: int,
    n: int,
    protocol: str | None,
) -> dict[str, Any]:
    relay, direct = _side(samples[RELAY]), _side(samples[DIRECT])
    units_ratio = relay["units_per_s"] / direct["units_per_s"]
    paired = [r.units_per_s / d.units_per_s for r, d in zip(samples[RELAY], samples[DIRECT], strict=True)]
    after = rss["after_bursts_mib"]
    growth = after[-1] - rss["start_mib"]
    return {
        "measure": f"relayed progress from a mounted server (burst of {n}) vs the same server's progress received "
        "directly by an SDK client (stdio)",
        "rounds": rounds,
        "warmup": warmup,
        "n": n,
        "order": "alternating relay/direct per round",
        "direct_protocol_version": protocol,
        "relay": relay,
        "direct": direct,
        "relay_whole_turn_median_s": round(statistics.median(turn_s), 4),
        "ratio": round(units_ratio, 3),
        "paired_ratio_median": round(statistics.median(paired), 3),
        "notifications_ratio": round(relay["notifications_per_s"] / direct["notifications_per_s"], 4),
        "goal": f">= {GOAL} (progress units per second, relay / direct)",
        "goal_met": goal_met(units_ratio, GOAL, at_most=False),
        "rss": {
            "pid": rss["pid"],
            "start_mib": round(rss["start_mib"], 1),
            "after_echo_turn_mib": round(rss["after_echo_turn_mib"], 1),
            "after_bursts_mib": [round(x, 1) for x in after],
            "last_minus_start_mib": round(growth, 1),
            "max_minus_start_mib": round(max(after) - rss["start_mib"], 1),
            "last_minus_after_echo_turn_mib": round(after[-1] - rss["after_echo_turn_mib"], 1),
            "goal": f"last - start <= {RSS_GOAL_MIB:g} MiB",
            "goal_met": growth <= RSS_GOAL_MIB,
        },
    }


def render(r: dict[str, Any]) -> str:
    relay, direct, rss = r["relay"], r["direct"], r["rss"]
    bursts = " ".join(f"{x:.1f}" for x in rss["after_bursts_mib"])
    return "\n".join(
        [
            r["measure"],
            f"rounds: {r['rounds']} (+{r['warmup']} warm-up), {r['order']}; direct client mode {MODE},"
            f" protocol {r['direct_protocol_version']}",
            f"relay, mounted call span (median): {relay['median_s'] * 1000:.0f} ms"
            f" (whole run_turn {r['relay_whole_turn_median_s'] * 1000:.0f} ms);"
            f" {relay['median_notifications']:g} notifications, last value {relay['median_last_value']:g}",
            f"direct, call (median): {direct['median_s'] * 1000:.0f} ms;"
            f" {direct['median_notifications']:g} notifications, last value {direct['median_last_value']:g}",
            f"relay notifications/s (median): {relay['notifications_per_s']:.1f} (coalesced, ~10/s by design)",
            f"direct notifications/s (median): {direct['notifications_per_s']:.1f}",
            f"notifications/s ratio (relay / direct), for context: {r['notifications_ratio']:.4f}",
            f"relay progress units/s (median): {relay['units_per_s']:.0f}",
            f"direct progress units/s (median): {direct['units_per_s']:.0f}",
            f"ratio (relay / direct progress units/s): {r['ratio']:.2f}"
            f" (median of per-round ratios {r['paired_ratio_median']:.2f})",
            goal_line(r["ratio"], GOAL, at_most=False) + " (progress units/s)",
            f"agent-server RSS (pid {rss['pid']}): start {rss['start_mib']:.1f} MiB,"
            f" after an echo turn {rss['after_echo_turn_mib']:.1f} MiB, after each burst {bursts} MiB",
            f"RSS last - start: {rss['last_minus_start_mib']:+.1f} MiB (max - start {rss['max_minus_start_mib']:+.1f},"
            f" last - after echo turn {rss['last_minus_after_echo_turn_mib']:+.1f});"
            f" goal: <= {RSS_GOAL_MIB:g} MiB: {'met' if rss['goal_met'] else 'NOT met'}",
            *machine_lines(r),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="measured rounds (default 7)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first (default 1)")
    parser.add_argument("--n", type=int, default=5000, help="progress notifications per burst (default 5000)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0 or not 1 <= args.n <= 1_000_000:
        parser.error("need --rounds >= 1, --warmup >= 0 and 1 <= --n <= 1000000")
    result = anyio.run(run, args.rounds, args.warmup, args.n)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
