"""What the worker-thread hops cost one turn in process: `AgentRuntime.run_turn` as shipped vs with every
`anyio.to_thread.run_sync` call run inline (a what-if, not a design: inline, SQLite and file-system calls can
hold the event loop).

The turn of `whole_turn.py` (a scripted `list_dir` of an empty directory, then the answer; SQLite store; no
MCP), but the directory is five components deep, past what the built-in tools do on the event loop, so the
turn keeps one hop (the tool; `begin_turn` and `finish_turn` run on the loop when the database is free).
One runtime; each round times a block of
`--turns` turns on each side, each turn in a fresh session created untimed, the order of the sides flipping
every round. Figures are medians over the rounds of the per-turn time of a block; the headline is the cost of
one hop, (shipped - inline) / 1, and how the in-process turn compares with the MCP echo round trip of
`whole_turn.py` is in bench/README.md ("Third round").

    python bench/runtime_hops.py [--rounds 21] [--turns 100] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _jsonrpc import loadavg, machine, machine_lines  # noqa: E402

from agent_server import AgentRuntime, Settings, TurnOptions  # noqa: E402
from agent_server.testing import ScriptedLLM  # noqa: E402

DEEP_EMPTY = "a/b/c/d/empty"
"""Deeper than the built-in tools run on the event loop (`INLINE_DEPTH`), so the call still takes its hop."""
TURN = [{"tool_calls": [{"name": "list_dir", "arguments": {"path": DEEP_EMPTY}}]}, {"content": "done"}]
HOPS_PER_TURN = 1
SHIPPED: Callable[..., Any] = anyio.to_thread.run_sync


async def _inline(fn: Callable[..., Any], *args: Any, **_options: Any) -> Any:
    return fn(*args)


async def _block(runtime: AgentRuntime, turns: int, inline: bool) -> float:
    """Seconds per turn over `turns` turns, each in a fresh session created untimed."""
    sessions = [(await runtime.create_session(title="bench")).session_id for _ in range(turns)]
    anyio.to_thread.run_sync = _inline if inline else SHIPPED  # type: ignore[assignment]
    try:
        start = time.perf_counter()
        for session_id in sessions:
            record = await runtime.run_turn(
                "list the empty dir", session_id=session_id, options=TurnOptions(max_tool_passes=1)
            )
            if record.status != "completed":
                raise RuntimeError(f"turn ended {record.status}")
        return (time.perf_counter() - start) / turns
    finally:
        anyio.to_thread.run_sync = SHIPPED


async def measure(rounds: int, turns: int) -> dict[str, Any]:
    info = machine()
    times: dict[str, list[float]] = {"shipped": [], "inline": []}
    with tempfile.TemporaryDirectory(prefix="bench-hops-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "workspace" / DEEP_EMPTY).mkdir(parents=True)
        llm = ScriptedLLM(TURN * (2 * turns * (rounds + 1)))
        settings = Settings(workspace=tmp / "workspace", state_dir=tmp / "state")
        async with AgentRuntime(settings, llm=llm) as runtime:
            await _block(runtime, turns, inline=False)  # warm-up: code loaded, store open
            for i in range(rounds):
                for side in ("shipped", "inline") if i % 2 == 0 else ("inline", "shipped"):
                    times[side].append(await _block(runtime, turns, inline=side == "inline"))
    shipped, inline = statistics.median(times["shipped"]), statistics.median(times["inline"])
    return {
        "measure": "AgentRuntime.run_turn in process (one list_dir round, SQLite): as shipped vs to_thread inline",
        "rounds": rounds,
        "turns_per_block": turns,
        "shipped_turn_s": round(shipped, 7),
        "inline_turn_s": round(inline, 7),
        "hop_s": round((shipped - inline) / HOPS_PER_TURN, 7),
        **info,
        "loadavg_after": loadavg(),
    }


def render(r: dict[str, Any]) -> str:
    return "\n".join(
        [
            r["measure"],
            f"rounds: {r['rounds']} blocks of {r['turns_per_block']} turns per side, order flipping every round",
            f"per turn, as shipped (1 worker-thread hop): {r['shipped_turn_s'] * 1e6:.0f} us",
            f"per turn, every hop run inline (what-if): {r['inline_turn_s'] * 1e6:.0f} us",
            f"one hop in a turn: {r['hop_s'] * 1e6:.0f} us",
            *machine_lines(r),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=21, help="rounds (default 21)")
    parser.add_argument("--turns", type=int, default=100, help="turns per block (default 100)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.turns < 1:
        parser.error("need --rounds >= 1 and --turns >= 1")
    result = anyio.run(measure, args.rounds, args.turns)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
