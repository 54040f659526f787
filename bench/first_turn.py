"""Spawn to the first completed `run_turn` versus spawn to the first echo result of a bare SDK server, paired.

Each sample is a fresh process. The clock starts just before the process is spawned; the raw JSON-RPC client of
`_jsonrpc.py` sends `initialize` (2025-11-25), waits for its result, sends `notifications/initialized` and then
the first call, and the clock stops when that call's result arrives:

* agent-server (`python -m agent_server`, a fresh `--state-dir` per sample, so SQLite creates its schema as on
  a first start): `tools/call run_turn` without a session id (the first call starts a new session) and without
  a progress token; the scripted model asks for `list_dir` on an empty directory once, then answers (the turn
  of `whole_turn.py`). The result is checked: completed, one tool round.
* baseline (`bench/baseline_server.py`, a bare SDK `MCPServer` with one tool): `tools/call echo`.

No `tools/list` before the call: a client that already knows the tools calls at once, and the first call is
what pays for the lazily loaded turn code and store. The time to the `initialize` result is recorded too, so the
figure splits into start-up (spawn to `initialize`) and first call (`initialize` result to the call's result).
The order alternates every round (AB, BA, ...); one unmeasured warm-up round first (warm `.pyc` and page
cache); the headline is the ratio of the medians.

    python bench/first_turn.py [--rounds 15] [--warmup 1] [--json]
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
from whole_turn import EMPTY_DIR, ONE_ROUND_TURN, TURN_ARGS, check_turn  # noqa: E402

GOAL = 1.1
AGENT = "agent-server"
BASELINE = "baseline"


async def first_call(argv: list[str], cwd: Path, name: str) -> tuple[float, float]:
    """(seconds from spawn to the initialize result, seconds from spawn to the first call's result)."""
    start = time.perf_counter()
    async with RpcServer.spawn(argv, cwd, name=name) as server:
        initialized = time.perf_counter() - start
        if name == AGENT:
            result = await server.call_tool("run_turn", TURN_ARGS)
        else:
            result = await server.call_tool("echo", {"text": ""})
        elapsed = time.perf_counter() - start
    if name == AGENT:
        check_turn(result)
    return initialized, elapsed


def _side(first: list[float], init: list[float]) -> dict[str, Any]:
    return {
        "first_call_s": [round(x, 4) for x in first],
        "median_s": round(statistics.median(first), 4),
        "initialize_median_s": round(statistics.median(init), 4),
        "call_after_initialize_median_s": round(statistics.median(f - i for f, i in zip(first, init, strict=True)), 4),
    }


async def run(rounds: int, warmup: int) -> dict[str, Any]:
    info = machine()
    first: dict[str, list[float]] = {AGENT: [], BASELINE: []}
    init: dict[str, list[float]] = {AGENT: [], BASELINE: []}
    with tempfile.TemporaryDirectory(prefix="bench-first-turn-") as tmp_name:
        tmp = Path(tmp_name)
        workspace = tmp / "workspace"
        (workspace / EMPTY_DIR).mkdir(parents=True)
        script = write_script(tmp / "script.json", ONE_ROUND_TURN)
        for i in range(warmup + rounds):
            argv = {AGENT: agent_argv(workspace, tmp / f"state-{i}", script), BASELINE: baseline_argv()}
            for name in (AGENT, BASELINE) if i % 2 == 0 else (BASELINE, AGENT):
                initialized, elapsed = await first_call(argv[name], tmp, name)
                if i >= warmup:
                    init[name].append(initialized)
                    first[name].append(elapsed)
    agent, base = _side(first[AGENT], init[AGENT]), _side(first[BASELINE], init[BASELINE])
    ratio = agent["median_s"] / base["median_s"]
    paired = [a / b for a, b in zip(first[AGENT], first[BASELINE], strict=True)]
    return {
        "measure": "spawn to the first completed run_turn (one tool round) vs spawn to the first echo result "
        "of a bare SDK server (raw JSON-RPC over stdio, fresh process per sample)",
        "rounds": rounds,
        "warmup": warmup,
        "order": "alternating AB/BA per round",
        AGENT: agent,
        BASELINE: base,
        "ratio": round(ratio, 3),
        "paired_ratio_median": round(statistics.median(paired), 3),
        "goal": f"<= {GOAL}",
        "goal_met": goal_met(ratio, GOAL),
        **info,
        "loadavg_after": loadavg(),
    }


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def render(r: dict[str, Any]) -> str:
    a, b = r[AGENT], r[BASELINE]
    return "\n".join(
        [
            r["measure"],
            f"rounds: {r['rounds']} (+{r['warmup']} warm-up), {r['order']}",
            f"agent-server spawn to first run_turn result (median): {_ms(a['median_s'])}"
            f" (initialize {_ms(a['initialize_median_s'])}, then the turn {_ms(a['call_after_initialize_median_s'])})",
            f"baseline spawn to first echo result (median): {_ms(b['median_s'])}"
            f" (initialize {_ms(b['initialize_median_s'])}, then the call {_ms(b['call_after_initialize_median_s'])})",
            f"ratio (agent-server / baseline): {r['ratio']:.2f}"
            f" (median of per-round ratios {r['paired_ratio_median']:.2f})",
            goal_line(r["ratio"], GOAL),
            *machine_lines(r),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="measured rounds, each one spawn of both (default 15)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first (default 1)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0:
        parser.error("need --rounds >= 1 and --warmup >= 0")
    result = anyio.run(run, args.rounds, args.warmup)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
