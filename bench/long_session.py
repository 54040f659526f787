"""CPU per one-call turn as one session grows: does a turn cost more because its session is long?

In process: one `AgentRuntime` on SQLite (a temp state dir) with a scripted model (one `list_dir` round on an
empty directory, then a short answer), `--turns` turns in one session, no compaction (the history stays far
below the context window). Prints the process's CPU time per turn (all threads) for each block of `--block`
turns. Without the parsed-history cache, a turn re-read and re-parsed the whole live history when it began
and estimated its tokens on the event loop again, so the figure grew with the session's length.

With `--store postgresql://...` the runtime's store is PostgreSQL instead (tables in a schema of their own,
created and dropped by this script).

    python bench/long_session.py [--turns 700] [--block 100] [--store URL] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _jsonrpc import loadavg, machine, machine_lines  # noqa: E402

ANSWER = "Nothing here: the folder is empty."


async def cpu_per_turn(turns: int, block: int, store: str | None) -> list[float]:
    if store is None:
        return await _cpu_per_turn(turns, block, None)
    from persistence import PostgresBench

    pg = PostgresBench(store, "long")
    await pg.open()
    await pg.store.close()  # the schema exists now; the runtime opens its own store in it
    try:
        return await _cpu_per_turn(turns, block, pg.scoped())
    finally:
        await pg.drop()


async def _cpu_per_turn(turns: int, block: int, store_url: str | None) -> list[float]:
    from agent_server import AgentRuntime, Settings
    from agent_server.testing import ScriptedLLM

    one_turn: list[dict[str, Any]] = [{"tool_calls": [{"name": "list_dir", "arguments": {}}]}, {"content": ANSWER}]
    script = one_turn * turns
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "workspace"
        workspace.mkdir()
        settings = Settings(workspace=workspace, state_dir=Path(tmp) / "state", store_url=store_url)
        async with AgentRuntime(settings, llm=ScriptedLLM(script)) as runtime:
            session_id = (await runtime.create_session(title="long session")).session_id
            blocks: list[float] = []
            start = time.process_time()
            for n in range(1, turns + 1):
                record = await runtime.run_turn("What is in this folder?", session_id=session_id)
                if record.status != "completed":
                    raise SystemExit(f"turn {n} ended {record.status}")
                if n % block == 0:
                    now = time.process_time()
                    blocks.append((now - start) * 1000 / block)
                    start = now
            return blocks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=700)
    parser.add_argument("--block", type=int, default=100)
    parser.add_argument("--store", metavar="URL", help="a postgresql:// database to run on instead of SQLite")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = machine()
    blocks = anyio.run(cpu_per_turn, args.turns, args.block, args.store)
    report.update(block=args.block, cpu_ms_per_turn=blocks, loadavg_after=loadavg())
    if args.json:
        sys.stdout.write(json.dumps(report) + "\n")
        return 0
    for i, ms in enumerate(blocks):
        sys.stdout.write(f"turns {i * args.block + 1}-{(i + 1) * args.block}: {ms:.2f} ms CPU per turn\n")
    sys.stdout.write(f"last block / first block: {blocks[-1] / blocks[0]:.2f}\n")
    for line in machine_lines(report):
        sys.stdout.write(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
