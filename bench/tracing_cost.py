"""What tracing costs when it is off: a turn and a spawn with the `otel` extra installed but unconfigured, versus
the same with the extra absent, side by side; and, for scale, with tracing on.

Three `python -m agent_server` processes over stdio (the same raw JSON-RPC client drives each), with a scripted
model whose turns each run one `list_dir` tool round and answer:

- `installed`: the extra is installed, no `OTEL_*` variable is set: tracing is off (what most users run);
- `absent`: OpenTelemetry's SDK and exporter are hidden from the process (an import hook makes them
  unfindable, as if the extra were not installed), no `OTEL_*` variable either: the baseline;
- `on`: settings `tracing: true` with `OTEL_TRACES_EXPORTER=none`: every span is made, none is exported.

Spawns: per round, each variant (in a rotating order) is spawned, timed to its first `tools/list` result, and
closed. Turns: the three processes then stay up, and per round each (in a rotating order) runs a block of `turns`
sequential `run_turn`s (each in a fresh session, created untimed); per turn = block / turns, so the three are
measured seconds apart. The headline is the ratio of the medians, installed / absent (goal: at most 1.05, i.e. no
measurable cost), with the median of the per-round ratios beside it; on / absent is printed too. Nothing is
timed in CI: `tests/test_bench_smoke.py` runs it at tiny sizes.

    python bench/tracing_cost.py [--rounds 7] [--warmup 1] [--turns 20] [--json]
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
from _jsonrpc import RpcServer, goal_line, goal_met, loadavg, machine, machine_lines, write_script  # noqa: E402

GOAL = 1.05
VARIANTS = ("installed", "absent", "on")
TOOL_CALL = {"tool_calls": [{"name": "list_dir", "arguments": {}}]}
ANSWER = {"content": "done"}
_LAUNCH = """
import importlib.abc, os, sys
variant = sys.argv.pop(1)
for name in [n for n in os.environ if n.startswith("OTEL_")]:
    del os.environ[name]
if variant == "on":
    os.environ["OTEL_TRACES_EXPORTER"] = "none"
if variant == "absent":
    class Hide(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.startswith(("opentelemetry.sdk", "opentelemetry.exporter")):
                raise ModuleNotFoundError(name)
            return None
    sys.meta_path.insert(0, Hide())
from agent_server.cli import main
sys.argv[0] = "agent-server"
sys.exit(main())
"""


def launch_argv(variant: str, workspace: Path, state: Path, script: Path, config: Path | None) -> list[str]:
    argv = [sys.executable, "-c", _LAUNCH, variant, "--workspace", str(workspace), "--state-dir", str(state)]
    argv += ["--llm", f"script:{script}"]
    return argv + (["--config", str(config)] if config is not None else [])


async def spawned(argv: list[str], cwd: Path) -> float:
    """Seconds from spawn to the first tools/list result (the process then exits)."""
    start = time.perf_counter()
    async with RpcServer.spawn(argv, cwd, name="agent-server") as server:
        await server.request("tools/list")
        return time.perf_counter() - start


async def per_turn(server: RpcServer, turns: int) -> float:
    """Seconds per turn over `turns` sequential turns, each in a fresh session (created untimed)."""
    elapsed = 0.0
    for i in range(turns):
        session = await server.call_tool("session_create", {"title": f"bench {i}"})
        args = {"prompt": "list", "session_id": session["structuredContent"]["session_id"]}
        began = time.perf_counter()
        result = await server.call_tool("run_turn", args)
        elapsed += time.perf_counter() - began
        if result["structuredContent"]["status"] != "completed":
            raise RuntimeError(f"turn ended {result['structuredContent']['status']}")
    return elapsed / turns


def _rotated(i: int) -> tuple[str, ...]:
    return VARIANTS[i % 3 :] + VARIANTS[: i % 3]


async def run(rounds: int, warmup: int, turns: int) -> dict[str, Any]:
    info = machine()
    spawns: dict[str, list[float]] = {v: [] for v in VARIANTS}
    turn_s: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="bench-tracing-") as tmp_name:
        tmp = Path(tmp_name)
        workspace = tmp / "workspace"
        workspace.mkdir()
        config = tmp / "tracing.json"
        config.write_text(json.dumps({"tracing": True}))
        script = write_script(tmp / "script.json", [TOOL_CALL, ANSWER] * turns * (warmup + rounds))

        def argv(variant: str, name: str) -> list[str]:
            return launch_argv(variant, workspace, tmp / f"state-{name}", script, config if variant == "on" else None)

        for i in range(warmup + rounds):  # spawns: one process per variant per round, then it exits
            for variant in _rotated(i):
                seconds = await spawned(argv(variant, f"spawn-{variant}-{i}"), tmp)
                if i >= warmup:
                    spawns[variant].append(seconds)
        async with (  # turns: the three processes stay up; each round times a block of turns on each
            RpcServer.spawn(argv("installed", "installed"), tmp, name="installed") as installed,
            RpcServer.spawn(argv("absent", "absent"), tmp, name="absent") as absent,
            RpcServer.spawn(argv("on", "on"), tmp, name="on") as on,
        ):
            servers = {"installed": installed, "absent": absent, "on": on}
            for i in range(warmup + rounds):
                for variant in _rotated(i):
                    seconds = await per_turn(servers[variant], turns)
                    if i >= warmup:
                        turn_s[variant].append(seconds)
    return _result(info, rounds, warmup, turns, spawns, turn_s)


def _paired(a: list[float], b: list[float]) -> float:
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def _result(
    info: dict[str, Any],
    rounds: int,
    warmup: int,
    turns: int,
    spawns: dict[str, list[float]],
    turn_s: dict[str, list[float]],
) -> dict[str, Any]:
    turn_median = {v: statistics.median(turn_s[v]) for v in VARIANTS}
    spawn_median = {v: statistics.median(spawns[v]) for v in VARIANTS}
    ratio = turn_median["installed"] / turn_median["absent"]
    return {
        "measure": "a turn (one tool round) and a spawn: otel extra installed but unconfigured vs absent (stdio)",
        "rounds": rounds,
        "warmup": warmup,
        "turns": turns,
        "order": "rotating per round (installed, absent, on)",
        "per_turn_s": {v: [round(x, 6) for x in turn_s[v]] for v in VARIANTS},
        "per_turn_median_s": {v: round(turn_median[v], 6) for v in VARIANTS},
        "spawn_median_s": {v: round(spawn_median[v], 4) for v in VARIANTS},
        "ratio": round(ratio, 3),
        "paired_ratio_median": round(_paired(turn_s["installed"], turn_s["absent"]), 3),
        "ratio_on": round(turn_median["on"] / turn_median["absent"], 3),
        "paired_ratio_on_median": round(_paired(turn_s["on"], turn_s["absent"]), 3),
        "spawn_ratio": round(spawn_median["installed"] / spawn_median["absent"], 3),
        "spawn_ratio_on": round(spawn_median["on"] / spawn_median["absent"], 3),
        "goal": f"<= {GOAL} (installed but unconfigured / absent, per turn)",
        "goal_met": goal_met(ratio, GOAL),
        **info,
        "loadavg_after": loadavg(),
    }


def render(r: dict[str, Any]) -> str:
    t, s = r["per_turn_median_s"], r["spawn_median_s"]
    return "\n".join(
        [
            r["measure"],
            f"rounds: {r['rounds']} (+{r['warmup']} warm-up), {r['turns']} turns each, {r['order']}",
            f"per turn (median): installed {t['installed'] * 1e3:.2f} ms, absent {t['absent'] * 1e3:.2f} ms,"
            f" on {t['on'] * 1e3:.2f} ms",
            f"spawn to tools/list (median): installed {s['installed'] * 1e3:.0f} ms, absent {s['absent'] * 1e3:.0f} ms,"
            f" on {s['on'] * 1e3:.0f} ms",
            f"ratio per turn (installed / absent): {r['ratio']:.3f}"
            f" (median of per-round ratios {r['paired_ratio_median']:.3f})",
            f"ratio per turn (on / absent): {r['ratio_on']:.3f}"
            f" (median of per-round ratios {r['paired_ratio_on_median']:.3f})",
            f"ratio spawn (installed / absent): {r['spawn_ratio']:.3f}; (on / absent): {r['spawn_ratio_on']:.3f}",
            goal_line(r["ratio"], GOAL),
            *machine_lines(r),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="measured rounds (default 7)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first (default 1)")
    parser.add_argument("--turns", type=int, default=20, help="turns per variant per round (default 20)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0 or args.turns < 1:
        parser.error("need --rounds >= 1, --warmup >= 0 and --turns >= 1")
    result = anyio.run(run, args.rounds, args.warmup, args.turns)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
