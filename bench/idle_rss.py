"""Idle RSS after `initialize`: `python -m agent_server` versus a bare SDK server, paired fresh processes.

Each sample is a fresh process driven by a raw JSON-RPC client over stdio: `initialize` (2025-11-25),
`notifications/initialized`, `tools/list`; once the `tools/list` result has arrived (the server is up, its
lifespan has run: for agent-server the SQLite store is open, a fresh state dir per sample), the client waits
`--settle` seconds and reads `VmRSS` from `/proc/<pid>/status`. The baseline is `bench/baseline_server.py` (a
bare SDK `MCPServer` with one tool). The order alternates every round (AB, BA, ...); the figure is the
ratio of the medians. Memory is not timing, but it still varies with what the allocator and the import
order do, so it is measured the same way.

    python bench/idle_rss.py [--rounds 7] [--settle 0.2] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
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
    vm_rss_kib,
    write_script,
)

GOAL = 1.2
AGENT = "agent-server"
BASELINE = "baseline"


async def idle_rss(argv: list[str], cwd: Path, name: str, settle: float) -> tuple[int, int]:
    """(VmRSS in KiB after initialize + tools/list, number of tools listed) of a fresh process."""
    async with RpcServer.spawn(argv, cwd, name=name) as server:
        tools = await server.request("tools/list")
        await anyio.sleep(settle)
        return vm_rss_kib(server.pid), len(tools.get("tools", []))


async def run(rounds: int, warmup: int, settle: float) -> dict[str, Any]:
    info = machine()
    rss: dict[str, list[int]] = {AGENT: [], BASELINE: []}
    tools: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="bench-rss-") as tmp_name:
        tmp = Path(tmp_name)
        workspace = tmp / "workspace"
        workspace.mkdir()
        script = write_script(tmp / "script.json", [{"content": "Hello from the bench script."}])
        for i in range(warmup + rounds):
            argv = {AGENT: agent_argv(workspace, tmp / f"state-{i}", script), BASELINE: baseline_argv()}
            for name in (AGENT, BASELINE) if i % 2 == 0 else (BASELINE, AGENT):
                kib, tools[name] = await idle_rss(argv[name], tmp, name, settle)
                if i >= warmup:
                    rss[name].append(kib)
    agent_median = statistics.median(rss[AGENT])
    base_median = statistics.median(rss[BASELINE])
    ratio = agent_median / base_median
    return {
        "measure": "idle RSS after initialize + tools/list (VmRSS, fresh process per sample, stdio)",
        "rounds": rounds,
        "warmup": warmup,
        "settle_s": settle,
        "order": "alternating AB/BA per round",
        "agent_server_kib": rss[AGENT],
        "baseline_kib": rss[BASELINE],
        "agent_server_median_kib": agent_median,
        "baseline_median_kib": base_median,
        "difference_kib": agent_median - base_median,
        "ratio": round(ratio, 3),
        "tools": tools,
        "goal": f"<= {GOAL}",
        "goal_met": goal_met(ratio, GOAL),
        **info,
        "loadavg_after": loadavg(),
    }


def render(r: dict[str, Any]) -> str:
    return "\n".join(
        [
            r["measure"],
            f"rounds: {r['rounds']} (+{r['warmup']} warm-up), {r['order']}, read {r['settle_s']:g} s after tools/list",
            f"agent-server VmRSS (median): {r['agent_server_median_kib'] / 1024:.1f} MiB ({r['tools'][AGENT]} tools)",
            f"baseline VmRSS (median): {r['baseline_median_kib'] / 1024:.1f} MiB ({r['tools'][BASELINE]} tool)",
            f"difference: {r['difference_kib'] / 1024:+.1f} MiB",
            f"ratio (agent-server / baseline): {r['ratio']:.2f}",
            goal_line(r["ratio"], GOAL),
            *machine_lines(r),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="measured rounds, each one A and one B (default 7)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first (default 1)")
    parser.add_argument("--settle", type=float, default=0.2, help="seconds to wait before reading VmRSS")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0 or args.settle < 0:
        parser.error("need --rounds >= 1, --warmup >= 0 and --settle >= 0")
    result = anyio.run(run, args.rounds, args.warmup, args.settle)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
