"""A whole turn on the PostgreSQL store versus the same turn on SQLite, in one run, interleaved pairs.

In-process: two `AgentRuntime`s with the same scripted model (one `list_dir` round on an empty directory, then
an answer; `when_exhausted: cycle`), one on SQLite in a temp state dir (the default store), one on
`--store postgresql://...` (tables in a schema of their own, created and dropped by this script). Each turn is
`runtime.run_turn` in a fresh session (created untimed just before it), so it includes everything a turn does
with its store: on PostgreSQL also the turn lock's connection and `pg_advisory_lock`. A pair is one turn on
each store, the order flipping every pair; the headline is the ratio of the medians (PostgreSQL / SQLite).
No goal: it says what a shared store costs per turn.

    python bench/store_turn.py --store postgresql://... [--rounds 200] [--warmup 10] [--json]
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
from _jsonrpc import loadavg, machine, machine_lines  # noqa: E402
from persistence import PostgresBench  # noqa: E402

from agent_server import AgentRuntime, Settings  # noqa: E402
from agent_server.testing import ScriptedLLM  # noqa: E402

SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "list_dir", "arguments": {}}]},
    {"content": "The directory is empty."},
]


def _model() -> ScriptedLLM:
    return ScriptedLLM(SCRIPT, when_exhausted="cycle")


async def timed_turn(runtime: AgentRuntime) -> float:
    session = await runtime.create_session(title="bench")
    start = time.perf_counter()
    record = await runtime.run_turn("what is here?", session_id=session.session_id)
    elapsed = time.perf_counter() - start
    if record.status != "completed" or len(record.tool_rounds) != 1:
        raise RuntimeError(f"unexpected turn: {record.status} {record.error}")
    return elapsed


async def run(url: str, rounds: int, warmup: int) -> dict[str, Any]:
    info = machine()
    times: dict[str, list[float]] = {"postgres": [], "sqlite": []}
    pg = PostgresBench(url, "turn")
    with tempfile.TemporaryDirectory(prefix="bench-store-turn-") as tmp_name:
        workspace = Path(tmp_name) / "ws"
        workspace.mkdir()
        await pg.open()
        await pg.store.close()  # the schema exists now; the runtime opens its own store in it
        sqlite_settings = Settings(workspace=workspace, state_dir=Path(tmp_name) / "state")
        pg_settings = Settings(workspace=workspace, store_url=pg.scoped())
        try:
            async with (
                AgentRuntime(sqlite_settings, llm=_model()) as sqlite_runtime,
                AgentRuntime(pg_settings, llm=_model()) as pg_runtime,
            ):
                runtimes = {"sqlite": sqlite_runtime, "postgres": pg_runtime}
                for i in range(warmup + rounds):
                    for name in ("postgres", "sqlite") if i % 2 == 0 else ("sqlite", "postgres"):
                        sample = await timed_turn(runtimes[name])
                        if i >= warmup:
                            times[name].append(sample)
        finally:
            await pg.drop()
    medians = {name: statistics.median(values) for name, values in times.items()}
    paired = [p / s for p, s in zip(times["postgres"], times["sqlite"], strict=True)]
    return {
        "measure": "a whole run_turn (one tool round) on PostgresStore vs SqliteStore, in-process",
        "rounds": rounds,
        "warmup": warmup,
        "order": "pairs, the order flipping every pair",
        "postgres_s": [round(x, 6) for x in times["postgres"]],
        "sqlite_s": [round(x, 6) for x in times["sqlite"]],
        "postgres_median_s": round(medians["postgres"], 6),
        "sqlite_median_s": round(medians["sqlite"], 6),
        "ratio": round(medians["postgres"] / medians["sqlite"], 3),
        "paired_ratio_median": round(statistics.median(paired), 3),
        **info,
        "loadavg_after": loadavg(),
    }


def render(r: dict[str, Any]) -> str:
    return "\n".join(
        [
            r["measure"],
            f"pairs: {r['rounds']} (+{r['warmup']} warm-up), {r['order']}",
            f"per turn on PostgreSQL, median: {r['postgres_median_s'] * 1e3:.2f} ms",
            f"per turn on SQLite, median: {r['sqlite_median_s'] * 1e3:.2f} ms",
            f"ratio (PostgreSQL / SQLite): {r['ratio']:.2f}",
            f"median of per-pair ratios: {r['paired_ratio_median']:.2f}",
            *machine_lines(r),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--store", metavar="URL", required=True, help="the postgresql:// database to measure on")
    parser.add_argument("--rounds", type=int, default=200, help="measured pairs (default 200)")
    parser.add_argument("--warmup", type=int, default=10, help="unmeasured pairs first (default 10)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0:
        parser.error("need --rounds >= 1 and --warmup >= 0")
    result = anyio.run(run, args.store, args.rounds, args.warmup)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
