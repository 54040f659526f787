"""A whole `run_turn` with one no-op tool round versus one bare SDK `tools/call` round trip, in interleaved pairs.

agent-server side: one `python -m agent_server` process over stdio, as users run it, with a scripted model that
asks for `list_dir` on an empty directory once and then answers. Each turn runs in a fresh session, created
untimed just before it (`session_create`), and is sent without a progress token (the server's own work; no
notifications). The turn is timed from sending `tools/call run_turn` to receiving its result, and checked:
completed, exactly one tool round.

Baseline: `bench/baseline_server.py` (a bare SDK `MCPServer` with one tool, `echo`) over stdio, one `tools/call
echo` round trip. Both are driven by the same raw JSON-RPC client of `_jsonrpc.py` (no client SDK), both processes
stay up for the whole run.

A **pair** is one turn and one echo call, back to back; the order flips every pair (AB, BA, ...), so load from
other users hits both alike. `--warmup` pairs first, unmeasured. The headline is the ratio of the medians over
all pairs (turn / echo); the median of the per-pair ratios is printed beside it, and the spread of the ratio of
medians over `--blocks` consecutive blocks of pairs says how much a run of `rounds / blocks` pairs would swing.

    python bench/whole_turn.py [--rounds 10000] [--warmup 50] [--blocks 10] [--progress] [--json]

`--progress` sends each `run_turn` with a progress token (the turn then streams its 10 events as progress
notifications, as most hosts ask; the echo sends none either way): the cost of the events over stdio.

`--rounds` is the number of measured pairs (the name `run_all.py` passes to every script). `--pid-file PATH`
writes the agent-server process id to PATH once it is up, for a sampling profiler to attach to (how the profile
in bench/README.md was taken; a profiler cannot run it as its child, since the child's stdout is the wire).
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

GOAL = 2.0
EMPTY_DIR = "empty"
TOOL_CALL = {"tool_calls": [{"name": "list_dir", "arguments": {"path": EMPTY_DIR}}]}
ANSWER = {"content": "done"}
ONE_ROUND_TURN = [TOOL_CALL, ANSWER]
TURN_ARGS = {"prompt": "list the empty dir", "max_tool_passes": 1}


def check_turn(result: dict[str, Any]) -> None:
    """A bench must not time a failure or a different turn: completed, one tool round."""
    record = result["structuredContent"]
    rounds = {call["round"] for call in record["tool_calls"]}
    if record["status"] != "completed" or len(rounds) != 1:
        raise RuntimeError(f"turn ended {record['status']} after {len(rounds)} tool rounds, expected 1")


async def timed_turn(agent: RpcServer, *, progress: bool = False) -> float:
    """Seconds for one run_turn with one tool round in a fresh session (created untimed); with `progress`, the
    call carries a progress token and its notifications are counted."""
    session = await agent.call_tool("session_create", {"title": "bench whole turn"})
    args = {**TURN_ARGS, "session_id": session["structuredContent"]["session_id"]}
    notes: list[dict[str, Any]] = []
    start = time.perf_counter()
    result = await agent.call_tool("run_turn", args, on_progress=notes.append if progress else None)
    elapsed = time.perf_counter() - start
    check_turn(result)
    if progress and not notes:
        raise RuntimeError("a run_turn with a progress token got no progress notification")
    return elapsed


async def timed_echo(baseline: RpcServer) -> float:
    start = time.perf_counter()
    await baseline.call_tool("echo", {"text": ""})
    return time.perf_counter() - start


def block_ratios(turns: list[float], echoes: list[float], blocks: int) -> list[float]:
    """Ratio of medians in each of `blocks` consecutive, equal blocks of pairs (the last one takes the rest)."""
    blocks = max(1, min(blocks, len(turns)))
    size = len(turns) // blocks
    bounds = [(i * size, (i + 1) * size if i < blocks - 1 else len(turns)) for i in range(blocks)]
    return [round(statistics.median(turns[a:b]) / statistics.median(echoes[a:b]), 3) for a, b in bounds]


async def run(rounds: int, warmup: int, blocks: int, pid_file: Path | None, progress: bool = False) -> dict[str, Any]:
    info = machine()
    turns: list[float] = []
    echoes: list[float] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-whole-turn-") as tmp_name:
        tmp = Path(tmp_name)
        workspace = tmp / "workspace"
        (workspace / EMPTY_DIR).mkdir(parents=True)
        script = write_script(tmp / "script.json", ONE_ROUND_TURN * (warmup + rounds))
        async with (
            RpcServer.spawn(agent_argv(workspace, tmp / "state", script), tmp, name="agent-server") as agent,
            RpcServer.spawn(baseline_argv(), tmp, name="baseline") as baseline,
        ):
            await agent.request("tools/list")
            await baseline.request("tools/list")
            if pid_file is not None:
                await anyio.Path(pid_file).write_text(f"{agent.pid}\n", encoding="utf-8")
            for i in range(warmup + rounds):
                if i % 2 == 0:
                    turn, echo = await timed_turn(agent, progress=progress), await timed_echo(baseline)
                else:
                    echo, turn = await timed_echo(baseline), await timed_turn(agent, progress=progress)
                if i >= warmup:
                    turns.append(turn)
                    echoes.append(echo)
    turn_median, echo_median = statistics.median(turns), statistics.median(echoes)
    spread = block_ratios(turns, echoes, blocks)
    return {
        "measure": f"a whole run_turn with one no-op tool round ({'with' if progress else 'no'} progress token) vs "
        "one bare SDK tools/call echo round trip (stdio)",
        "progress": progress,
        "pairs": rounds,
        "warmup": warmup,
        "order": "alternating AB/BA per pair; each turn in a fresh session created untimed",
        "turn_median_s": round(turn_median, 6),
        "echo_median_s": round(echo_median, 6),
        "ratio": round(turn_median / echo_median, 3),
        "paired_ratio_median": round(statistics.median(t / e for t, e in zip(turns, echoes, strict=True)), 3),
        "block_pairs": rounds // max(1, min(blocks, rounds)),
        "block_ratios": spread,
        "goal": f"<= {GOAL}",
        "goal_met": goal_met(turn_median / echo_median, GOAL),
        "wall_s": round(time.perf_counter() - started, 1),
        "pid_file": str(pid_file) if pid_file else None,
        **info,
        "loadavg_after": loadavg(),
    }


def render(r: dict[str, Any]) -> str:
    spread = r["block_ratios"]
    return "\n".join(
        [
            r["measure"],
            f"pairs: {r['pairs']} (+{r['warmup']} warm-up), {r['order']}; wall {r['wall_s']:g} s",
            *(
                [f"agent-server pid written to {r['pid_file']} (a profiler may have been attached)"]
                if r["pid_file"]
                else []
            ),
            f"agent-server run_turn, one tool round (median): {r['turn_median_s'] * 1e6:.0f} us",
            f"baseline tools/call echo (median): {r['echo_median_s'] * 1e6:.0f} us",
            f"ratio (run_turn / echo): {r['ratio']:.2f} (median of per-pair ratios {r['paired_ratio_median']:.2f})",
            f"ratio over blocks of {r['block_pairs']} pairs: {min(spread):.2f} .. {max(spread):.2f}"
            f" ({' '.join(f'{x:.2f}' for x in spread)})",
            goal_line(r["ratio"], GOAL),
            *machine_lines(r),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10000, help="measured pairs (default 10000, about a minute)")
    parser.add_argument("--warmup", type=int, default=50, help="unmeasured pairs first (default 50)")
    parser.add_argument("--blocks", type=int, default=10, help="blocks for the spread line (default 10)")
    parser.add_argument("--pid-file", type=Path, help="write the agent-server pid here (to attach a profiler)")
    parser.add_argument("--progress", action="store_true", help="send run_turn with a progress token")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0 or args.blocks < 1:
        parser.error("need --rounds >= 1, --warmup >= 0 and --blocks >= 1")
    result = anyio.run(run, args.rounds, args.warmup, args.blocks, args.pid_file, args.progress)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
