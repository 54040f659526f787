"""A mounted tool call through `run_turn` versus a direct SDK call to the same server, paired.

agent-server side: one `python -m agent_server --workspace W --state-dir S --llm script:FILE --mcp-config CONFIG`
process over stdio, as users run it, with `tests/fakes/mcp_echo.py` mounted as `fake` (its tools are
`fake__echo`, ...). It is driven by the raw JSON-RPC client of `_jsonrpc.py` (no client SDK on this side), which
sends `tools/call run_turn` with a progress token (as a client that shows progress does; `--no-progress` to
send none) in a fresh session each time (created untimed), and times it from sending the request to receiving
the result. Two kinds of turn, `--turns` K of each per round:

* **turn with one mounted call**: the scripted model asks for `fake__echo {"text": "ping"}`, then answers;
* **turn without a tool**: the scripted model answers at once (the turn's fixed cost, for the marginal figure).

Baseline: an `mcp.Client` (stdio, mode `auto` like the mounts) to a separate process of the same fake server,
K sequential `call_tool("echo", {"text": "ping"})`, each timed. For context only, the same K calls from the raw
JSON-RPC client to a third process of the fake server (how much of the direct figure is the client SDK).

Every process stays up for the whole run; one unmeasured warm-up round first, then the order of the four
measurements flips every round. Each round's figure per side is its mean over the K; the figures are medians
over the rounds. Two ratios are printed:

* **headline** (the one the goal, <= 2.2x, applies to; the issue's "a mounted tool call through run_turn ...
  against a direct SDK call"): a whole turn with one mounted call / one direct SDK call;
* **marginal**, for insight: (turn with the call - turn without a tool) / direct SDK call, the mounted call's
  own cost inside the turn (the registry lookup, argument validation, the relay through agent-server's own
  `mcp.Client`, the result's conversion, the extra model round and the tool events).

    python bench/mounted_call.py [--rounds 15] [--warmup 1] [--turns 20] [--no-progress] [--json]
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
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _jsonrpc import (  # noqa: E402
    RpcServer,
    agent_argv,
    goal_line,
    goal_met,
    loadavg,
    machine,
    machine_lines,
    write_script,
)
from _mount_common import (  # noqa: E402
    FAKE_SERVER,
    MODE,
    allow_mounted,
    direct_client,
    mount_config,
    mounted,
    new_session,
    wait_mount_ready,
)

GOAL = 2.2
TEXT = "ping"
TOOL_CALL = {"tool_calls": [{"name": mounted("echo"), "arguments": {"text": TEXT}}]}
ANSWER = {"content": "done"}

WITH_CALL = "turn_with_call"
NO_TOOL = "turn_without_tool"
DIRECT = "direct_sdk"
RAW = "direct_raw"
ORDER = [WITH_CALL, NO_TOOL, DIRECT, RAW]


def orders(rounds: int, warmup: int) -> list[list[str]]:
    """The order of the four measurements in each round: forwards on even rounds, backwards on odd ones."""
    return [ORDER if i % 2 == 0 else ORDER[::-1] for i in range(warmup + rounds)]


def script_for(plan: list[list[str]], turns: int) -> list[dict[str, Any]]:
    """The scripted model's responses for every turn of the run, in the order the turns run.

    A turn with the call consumes two responses (the call, then the answer), a turn without a tool one.
    """
    responses: list[dict[str, Any]] = []
    for order in plan:
        for kind in order:
            if kind == WITH_CALL:
                responses += [TOOL_CALL, ANSWER] * turns
            elif kind == NO_TOOL:
                responses += [ANSWER] * turns
    return responses


async def timed_turns(agent: RpcServer, turns: int, with_call: bool, progress: bool) -> tuple[float, int]:
    """(mean seconds per run_turn, progress notifications per turn) over `turns` turns, each in a fresh session."""
    total = 0.0
    seen = [0]

    def on_progress(_params: dict[str, Any]) -> None:
        seen[0] += 1

    for _ in range(turns):
        session_id = await new_session(agent, "bench mounted call")
        args = {"prompt": "echo ping", "session_id": session_id, "detail": "full"}  # full: the check reads results
        start = time.perf_counter()
        result = await agent.call_tool("run_turn", args, on_progress=on_progress if progress else None)
        total += time.perf_counter() - start
        _check_turn(result["structuredContent"], with_call)
    return total / turns, seen[0] // turns


def _check_turn(record: dict[str, Any], with_call: bool) -> None:
    rounds = record["tool_rounds"]
    if record["status"] != "completed" or len(rounds) != (1 if with_call else 0):
        raise RuntimeError(f"turn ended {record['status']} after {len(rounds)} tool rounds: {record.get('error')}")
    if with_call:
        result = rounds[0]["tool_results"][0]
        texts = [part.get("text") for part in result["content"]]
        if result["is_error"] or result["name"] != mounted("echo") or texts != [TEXT]:
            raise RuntimeError(f"the mounted call went wrong: {result}")


async def timed_sdk_calls(client: Client, calls: int) -> float:
    total = 0.0
    for _ in range(calls):
        start = time.perf_counter()
        result = await client.call_tool("echo", {"text": TEXT})
        total += time.perf_counter() - start
        if result.is_error or [getattr(part, "text", None) for part in result.content] != [TEXT]:
            raise RuntimeError(f"direct call went wrong: {result}")
    return total / calls


async def timed_raw_calls(server: RpcServer, calls: int) -> float:
    total = 0.0
    for _ in range(calls):
        start = time.perf_counter()
        await server.call_tool("echo", {"text": TEXT})
        total += time.perf_counter() - start
    return total / calls


async def run(rounds: int, warmup: int, turns: int, progress: bool) -> dict[str, Any]:
    info = machine()
    plan = orders(rounds, warmup)
    samples: dict[str, list[float]] = {kind: [] for kind in ORDER}
    notes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="bench-mounted-call-") as tmp_name:
        tmp = Path(tmp_name)
        workspace = tmp / "workspace"
        workspace.mkdir()
        script = write_script(tmp / "script.json", script_for(plan, turns))
        config = mount_config(tmp / "mcp.json")
        agent_cmd = agent_argv(
            workspace, tmp / "state", script, "--mcp-config", str(config), *allow_mounted(tmp / "settings.json")
        )
        raw_cmd = [sys.executable, str(FAKE_SERVER)]
        async with (
            RpcServer.spawn(agent_cmd, tmp, name="agent-server") as agent,
            RpcServer.spawn(raw_cmd, tmp, name="fake (raw)") as raw,
            direct_client() as client,
        ):
            mount = await wait_mount_ready(agent)
            await raw.request("tools/list")
            for i, order in enumerate(plan):
                values: dict[str, float] = {}
                for kind in order:
                    if kind == DIRECT:
                        values[kind] = await timed_sdk_calls(client, turns)
                    elif kind == RAW:
                        values[kind] = await timed_raw_calls(raw, turns)
                    else:
                        values[kind], notes[kind] = await timed_turns(agent, turns, kind == WITH_CALL, progress)
                if i >= warmup:
                    for kind, value in values.items():
                        samples[kind].append(value)
            protocol = client.protocol_version
    return (
        summarize(samples, rounds, warmup, turns, progress, notes, mount, protocol)
        | info
        | {"loadavg_after": loadavg()}
    )


def summarize(
    samples: dict[str, list[float]],
    rounds: int,
    warmup: int,
    turns: int,
    progress: bool,
    notes: dict[str, int],
    mount: dict[str, Any],
    protocol: str | None,
) -> dict[str, Any]:
    med = {kind: statistics.median(values) for kind, values in samples.items()}
    marginal = [w - n for w, n in zip(samples[WITH_CALL], samples[NO_TOOL], strict=True)]
    headline = med[WITH_CALL] / med[DIRECT]
    paired = [w / d for w, d in zip(samples[WITH_CALL], samples[DIRECT], strict=True)]
    return {
        "measure": "a mounted tool call through run_turn vs a direct SDK call to the same server (stdio)",
        "method": f"{turns} run_turn per kind per round, each in a fresh session; {turns} sequential direct calls; "
        "mean per round, median over rounds",
        "rounds": rounds,
        "warmup": warmup,
        "turns": turns,
        "progress_token": progress,
        "progress_notifications_per_turn": notes,
        "order": "alternating per round: with call, without tool, direct SDK, direct raw / the reverse",
        "mounted_server": mount,
        "direct_protocol_version": protocol,
        "samples_s": {kind: [round(x, 6) for x in values] for kind, values in samples.items()},
        "turn_with_call_median_s": round(med[WITH_CALL], 6),
        "turn_without_tool_median_s": round(med[NO_TOOL], 6),
        "marginal_call_median_s": round(statistics.median(marginal), 6),
        "direct_sdk_median_s": round(med[DIRECT], 6),
        "direct_raw_median_s": round(med[RAW], 6),
        "ratio": round(headline, 3),
        "paired_ratio_median": round(statistics.median(paired), 3),
        "marginal_ratio": round(statistics.median(marginal) / med[DIRECT], 3),
        "direct_sdk_over_raw": round(med[DIRECT] / med[RAW], 3),
        "goal": f"<= {GOAL} (headline: whole turn with one mounted call / direct SDK call)",
        "goal_met": goal_met(headline, GOAL),
    }


def render(r: dict[str, Any]) -> str:
    us = 1e6
    notes = r["progress_notifications_per_turn"]
    with_notes = f" ({notes[WITH_CALL]} progress notifications)" if r["progress_token"] else " (no progress token)"
    without_notes = f" ({notes[NO_TOOL]} progress notifications)" if r["progress_token"] else ""
    mount = r["mounted_server"]
    return "\n".join(
        [
            r["measure"],
            f"method: {r['method']}",
            f"rounds: {r['rounds']} (+{r['warmup']} warm-up), {r['order']}",
            f"mounted server: {mount['name']} ({mount['transport']}, {mount['tool_count']} tools);"
            f" direct client mode {MODE}, protocol {r['direct_protocol_version']}",
            f"turn with one mounted call (median): {r['turn_with_call_median_s'] * us:.0f} us{with_notes}",
            f"turn without a tool (median): {r['turn_without_tool_median_s'] * us:.0f} us{without_notes}",
            f"mounted call's own cost, with - without (median of per-round differences):"
            f" {r['marginal_call_median_s'] * us:.0f} us",
            f"direct SDK call (median): {r['direct_sdk_median_s'] * us:.0f} us",
            f"direct raw JSON-RPC call, for context (median): {r['direct_raw_median_s'] * us:.0f} us"
            f" (SDK client / raw: {r['direct_sdk_over_raw']:.2f})",
            f"ratio (turn with one mounted call / direct SDK call): {r['ratio']:.2f}"
            f" (median of per-round ratios {r['paired_ratio_median']:.2f})",
            f"marginal ratio ((turn with call - turn without tool) / direct SDK call): {r['marginal_ratio']:.2f}",
            goal_line(r["ratio"], GOAL) + " (applies to the whole-turn ratio)",
            *machine_lines(r),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="measured rounds (default 15)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first (default 1)")
    parser.add_argument("--turns", type=int, default=20, help="turns (and direct calls) per kind per round (20)")
    parser.add_argument("--no-progress", action="store_true", help="send run_turn without a progress token")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0 or not 1 <= args.turns <= 1000:
        parser.error("need --rounds >= 1, --warmup >= 0 and 1 <= --turns <= 1000")
    result = anyio.run(run, args.rounds, args.warmup, args.turns, not args.no_progress)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
