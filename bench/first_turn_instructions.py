"""The first turn counted in instructions: `first_turn.py`'s exchange under valgrind's callgrind, which counts the
instructions each process runs, the same for the same code whatever else the machine does.

Each side is one fresh process run under `valgrind --tool=callgrind` (about 50 times slower, so the two sides
run at once, one a core). The raw JSON-RPC client sends `initialize`, `notifications/initialized` and the
first call, as in `first_turn.py` (agent-server: `run_turn` with the scripted one-round turn in a fresh state
dir; baseline: the bare SDK server's `echo`); when the call's result has arrived it asks callgrind to write the
counts so far (`callgrind_control --dump`), so the figure ends at the result: neither process's exit is counted
(the bare SDK server's final collection of its heap costs it about 150 M instructions). `PYTHONHASHSEED=0` makes
the runs repeatable. The headline is the ratio of the two counts. Instructions are not time (a cache miss costs
more than an add, so the cyclic collector's walks cost more time than their count says) but they do not move
with the machine's load: this is the figure to compare two versions of the code by (`--against DIR`: a third
process runs that source tree).

    python bench/first_turn_instructions.py [--against DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _jsonrpc import RpcServer, agent_argv, baseline_argv, goal_line, machine, write_script  # noqa: E402
from whole_turn import EMPTY_DIR, ONE_ROUND_TURN, TURN_ARGS, check_turn  # noqa: E402

GOAL = 1.1
TIMEOUT_S = 900
"""Each step's bound: valgrind runs Python about 50 times slower, and slower still on a busy machine."""
TOTALS = re.compile(rb"^(?:summary|totals):\s*(\d+)", re.MULTILINE)


async def counted(name: str, argv: list[str], cwd: Path, out: Path, env: dict[str, str]) -> int:
    """The instructions `argv` ran from its start to its first call's result."""
    # `env` execs valgrind, which runs Python in the same process: the pid callgrind_control is given.
    valgrind = ["env", *(f"{k}={v}" for k, v in env.items()), "valgrind", "--tool=callgrind"]
    command = [*valgrind, f"--callgrind-out-file={out}", *argv]
    async with RpcServer.spawn(command, cwd, name=name, timeout_s=TIMEOUT_S) as server:
        with anyio.fail_after(TIMEOUT_S):
            if name == "baseline":
                await server.call_tool("echo", {"text": ""})
            else:
                check_turn(await server.call_tool("run_turn", TURN_ARGS))
            await anyio.run_process(["callgrind_control", "--dump", str(server.process.pid)])
    dumps = sorted(out.parent.glob(f"{out.name}.*"))
    if not dumps:
        raise RuntimeError(f"{name}: callgrind wrote no dump at the result")
    found = TOTALS.search(dumps[0].read_bytes())
    if found is None:
        raise RuntimeError(f"{name}: no totals in {dumps[0]}")
    return int(found.group(1))


async def run(against: Path | None) -> dict[str, Any]:
    info = machine()
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="bench-first-turn-instr-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "workspace" / EMPTY_DIR).mkdir(parents=True)
        script = write_script(tmp / "script.json", ONE_ROUND_TURN)
        seed = {"PYTHONHASHSEED": "0"}
        sides: dict[str, tuple[list[str], dict[str, str]]] = {
            "agent-server": (agent_argv(tmp / "workspace", tmp / "state-a", script), seed),
            "baseline": (baseline_argv(), seed),
        }
        if against is not None:
            path = {**seed, "PYTHONPATH": str(against)}
            sides["against"] = (agent_argv(tmp / "workspace", tmp / "state-b", script), path)

        async def one(name: str) -> None:
            argv, env = sides[name]
            counts[name] = await counted(name, argv, tmp, tmp / f"callgrind.{name}", env)

        async with anyio.create_task_group() as tg:
            for name in sides:
                tg.start_soon(one, name)
    result: dict[str, Any] = {
        "measure": "instructions from spawn to the first call's result (callgrind), agent-server's first run_turn "
        "vs the bare SDK server's first echo",
        "instructions": counts,
        "ratio": round(counts["agent-server"] / counts["baseline"], 3),
        "goal": f"<= {GOAL}",
        **info,
    }
    if against is not None:
        result["against"] = str(against)
        result["ratio_against"] = round(counts["against"] / counts["baseline"], 3)
        result["change"] = round(counts["agent-server"] / counts["against"], 3)
    return result


def render(r: dict[str, Any]) -> str:
    counts = r["instructions"]
    lines = [r["measure"], *(f"{name}: {count / 1e6:,.1f} M instructions" for name, count in counts.items())]
    lines.append(f"ratio (agent-server / baseline): {r['ratio']:.3f}")
    if "against" in r:
        lines.append(f"ratio of {r['against']} / baseline: {r['ratio_against']:.3f}; this tree / it: {r['change']:.3f}")
    lines.append(goal_line(r["ratio"], GOAL))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--against", type=Path, metavar="DIR", help="also count this source tree's agent-server")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    missing = [tool for tool in ("valgrind", "callgrind_control") if shutil.which(tool) is None]
    if missing:
        parser.error(f"needs {' and '.join(missing)} (Debian's valgrind package)")
    result = anyio.run(run, None if args.against is None else args.against.resolve())
    sys.stdout.write((json.dumps(result, indent=2) if args.json else render(result)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
