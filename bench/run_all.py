"""Run every bench script in turn with its defaults (spawn, importtime, code_size) and print a header first.

    python bench/run_all.py [--rounds N] [--warmup N]

`--rounds`/`--warmup` are passed to the timed scripts when given (the smoke test uses `--rounds 1`).
Exits non-zero if any script fails.
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
    args = parser.parse_args(argv)
    rounds = ["--rounds", str(args.rounds)] if args.rounds is not None else []
    warmup = ["--warmup", str(args.warmup)] if args.warmup is not None else []
    scripts: list[tuple[str, list[str]]] = [
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
        ("approval_gate.py", [*rounds, *warmup]),
        ("runtime_hops.py", rounds),
        ("end_of_input.py", [*rounds, *warmup]),
    ]
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    host = f"{platform.node()}: python {platform.python_version()}, {os.cpu_count()} cores"
    print(f"bench run {now} on {host}, load {load}")
    failed: list[str] = []
    for script, extra in scripts:
        cmd = [sys.executable, str(BENCH_DIR / script), *extra]
        print(f"\n== {' '.join(['python', f'bench/{script}', *extra])}", flush=True)
        if subprocess.run(cmd, check=False).returncode != 0:
            failed.append(script)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
