"""Run every bench script in turn with its defaults (spawn, importtime, code_size, ...) and print a header first.

    python bench/run_all.py [--rounds N] [--warmup N] [--list]

`--rounds`/`--warmup` are passed to the timed scripts when given. `--list` prints the commands instead of
running them (the smoke test checks that every figure's script is among them; each script's own smoke test
runs it). Exits non-zero if any script fails.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, help="rounds for spawn.py and importtime.py (default: theirs)")
    parser.add_argument("--warmup", type=int, help="warm-up rounds for spawn.py (default: its own)")
    parser.add_argument("--list", action="store_true", help="print the commands, run nothing")
    args = parser.parse_args(argv)
    commands = [
        [sys.executable, str(BENCH_DIR / script), *extra] for script, extra in scripts(args.rounds, args.warmup)
    ]
    if args.list:
        print("\n".join(" ".join(command) for command in commands))
        return 0
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    host = f"{platform.node()}: python {platform.python_version()}, {os.cpu_count()} cores"
    print(f"bench run {now} on {host}, load {load}")
    failed: list[str] = []
    for cmd in commands:
        print(f"\n== {' '.join(['python', f'bench/{Path(cmd[1]).name}', *cmd[2:]])}", flush=True)
        if subprocess.run(cmd, check=False).returncode != 0:
            failed.append(Path(cmd[1]).name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def scripts(rounds_given: int | None, warmup_given: int | None) -> list[tuple[str, list[str]]]:
    """Each figure's script and its arguments, in the order they run."""
    rounds = ["--rounds", str(rounds_given)] if rounds_given is not None else []
    warmup = ["--warmup", str(warmup_given)] if warmup_given is not None else []
    return [
        ("spawn.py", [*rounds, *warmup]),
        ("importtime.py", rounds),
        ("code_size.py", []),
        ("provider_overhead.py", rounds),
        ("cache_savings.py", []),
        ("tool_round.py", [*rounds, *warmup]),
        ("persistence.py", [*rounds, *warmup]),
        ("concurrency.py", [*rounds, *warmup]),
        ("idle_rss.py", [*rounds, *warmup]),
        ("token_stream.py", [*rounds, *warmup]),
        ("mounted_call.py", [*rounds, *warmup]),
        ("relay_progress.py", [*rounds, *warmup]),
        ("whole_turn.py", [*rounds, *warmup]),
        ("first_turn.py", [*rounds, *warmup]),
        ("first_turn_instructions.py", []),
        ("approval_gate.py", [*rounds, *warmup]),
        ("runtime_hops.py", rounds),
        ("end_of_input.py", [*rounds, *warmup]),
        ("tracing_cost.py", [*rounds, *warmup]),
        ("http_load.py", [*rounds, *warmup]),
        ("loop_lag.py", [*rounds, *warmup]),
        ("long_session.py", []),
    ]


if __name__ == "__main__":
    sys.exit(main())
