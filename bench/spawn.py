"""Spawn to first `tools/list` result: `python -m agent_server` versus a bare SDK server, paired.

Each sample is a fresh process. The clock starts just before the process is spawned and stops when the
`tools/list` response line arrives on its stdout. The client is a raw JSON-RPC driver over anyio pipes
(`initialize` 2025-11-25, wait for its result, `notifications/initialized`, `tools/list`), so no client-side
SDK import or session machinery is in the figure.

The two servers are measured side by side in one run, alternating the order each round (AB, BA, AB, ...),
and the headline figure is the ratio of the medians (agent-server / baseline). Absolute times on a shared,
noisy machine say little; the ratio is what to compare across runs.

    python bench/spawn.py [--rounds 15] [--warmup 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _jsonrpc import ensure_bytecode  # noqa: E402

BENCH_DIR = Path(__file__).resolve().parent
BASELINE_SERVER = BENCH_DIR / "baseline_server.py"
PROTOCOL_VERSION = "2025-11-25"
SCRIPT = {"responses": [{"content": "Hello from the bench script."}]}
TIMEOUT_S = 60.0
MAX_LINE_BYTES = 64 * 1024 * 1024

AGENT = "agent-server"
BASELINE = "baseline"


@dataclass(frozen=True)
class Target:
    name: str
    argv: list[str]


@dataclass(frozen=True)
class Sample:
    seconds: float
    tools: int


def cores() -> dict[str, int | None]:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {"cpu_count": os.cpu_count(), "usable": usable}


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


LLM: str | None = None
"""`--llm SPEC` for agent-server instead of the scripted model (e.g. `openai:m`: a provider configured at start)."""


def targets(tmp: Path, round_no: int) -> dict[str, Target]:
    """The two commands; agent-server gets a fresh state dir per spawn (no state carried between samples)."""
    script = tmp / "script.json"
    if not script.exists():
        script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    workspace = tmp / "workspace"
    workspace.mkdir(exist_ok=True)
    state = tmp / f"state-{round_no}"
    agent = [
        sys.executable,
        "-m",
        "agent_server",
        "--workspace",
        str(workspace),
        "--state-dir",
        str(state),
        "--llm",
        LLM or f"script:{script}",
    ]
    return {AGENT: Target(AGENT, agent), BASELINE: Target(BASELINE, [sys.executable, str(BASELINE_SERVER)])}


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


async def _response(reader: BufferedByteReceiveStream, request_id: int) -> dict[str, Any]:
    """The response to `request_id`, skipping notifications and other messages."""
    while True:
        raw = await reader.receive_until(b"\n", MAX_LINE_BYTES)
        if not raw.strip():
            continue
        message = json.loads(raw)
        if message.get("id") == request_id and ("result" in message or "error" in message):
            if "error" in message:
                raise RuntimeError(f"request {request_id} failed: {message['error']}")
            return message["result"]


async def _stop(process: Process) -> None:
    with anyio.CancelScope(shield=True):
        if process.stdin is not None:
            await process.stdin.aclose()
        with anyio.move_on_after(10):
            await process.wait()
            return
        process.kill()
        await process.wait()


async def spawn_to_tools_list(target: Target, cwd: Path) -> Sample:
    """Seconds from spawning `target` to its `tools/list` result arriving (raw JSON-RPC over stdio)."""
    with tempfile.TemporaryFile() as errlog:
        start = time.perf_counter()
        process = await anyio.open_process(
            target.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, cwd=cwd
        )
        try:
            assert process.stdin is not None and process.stdout is not None
            reader = BufferedByteReceiveStream(process.stdout)
            with anyio.fail_after(TIMEOUT_S):
                await process.stdin.send(
                    _line(
                        {
                            "jsonrpc": "2.0",
                            "id": 1,
                            "method": "initialize",
                            "params": {
                                "protocolVersion": PROTOCOL_VERSION,
                                "capabilities": {},
                                "clientInfo": {"name": "bench-spawn", "version": "0"},
                            },
                        }
                    )
                )
                await _response(reader, 1)
                await process.stdin.send(
                    _line({"jsonrpc": "2.0", "method": "notifications/initialized"})
                    + _line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
                )
                result = await _response(reader, 2)
                elapsed = time.perf_counter() - start
        except Exception as exc:
            await _stop(process)
            raise RuntimeError(f"{target.name} failed: {exc!r}\nstderr:\n{_tail(errlog)}") from exc
        await _stop(process)
    return Sample(elapsed, len(result.get("tools", [])))


def _tail(errlog: IO[bytes], limit: int = 4000) -> str:
    errlog.seek(0)
    return errlog.read().decode(errors="replace")[-limit:]


async def run(rounds: int, warmup: int) -> dict[str, Any]:
    times: dict[str, list[float]] = {AGENT: [], BASELINE: []}
    tools: dict[str, int] = {}
    load_before = loadavg()
    with tempfile.TemporaryDirectory(prefix="bench-spawn-") as tmp_name:
        tmp = Path(tmp_name)
        for i in range(warmup + rounds):
            pair = targets(tmp, i)
            order = [AGENT, BASELINE] if i % 2 == 0 else [BASELINE, AGENT]
            for name in order:
                sample = await spawn_to_tools_list(pair[name], tmp)
                tools[name] = sample.tools
                if i >= warmup:
                    times[name].append(sample.seconds)
    agent_median = statistics.median(times[AGENT])
    base_median = statistics.median(times[BASELINE])
    paired = [a / b for a, b in zip(times[AGENT], times[BASELINE], strict=True)]
    return {
        "measure": "spawn to first tools/list result (raw JSON-RPC over stdio, initialize " + PROTOCOL_VERSION + ")",
        "rounds": rounds,
        "warmup": warmup,
        "order": "alternating AB/BA per round",
        "agent_server_s": [round(t, 4) for t in times[AGENT]],
        "baseline_s": [round(t, 4) for t in times[BASELINE]],
        "agent_server_median_s": round(agent_median, 4),
        "baseline_median_s": round(base_median, 4),
        "ratio": round(agent_median / base_median, 3),
        "paired_ratio_median": round(statistics.median(paired), 3),
        "tools": tools,
        "loadavg_before": load_before,
        "loadavg_after": loadavg(),
        "cores": cores(),
        "python": sys.version.split()[0],
    }


def _tools(n: int) -> str:
    return f"{n} tool" if n == 1 else f"{n} tools"


def render(r: dict[str, Any]) -> str:
    c = r["cores"]
    return "\n".join(
        [
            r["measure"],
            f"rounds: {r['rounds']} (+{r['warmup']} warm-up), {r['order']}, fresh process per sample",
            f"agent-server median: {r['agent_server_median_s'] * 1000:.0f} ms ({_tools(r['tools'][AGENT])})",
            f"baseline median: {r['baseline_median_s'] * 1000:.0f} ms ({_tools(r['tools'][BASELINE])})",
            f"ratio (agent-server / baseline): {r['ratio']:.2f}",
            f"median of per-round ratios: {r['paired_ratio_median']:.2f}",
            "load average (1/5/15 min): before {} after {}".format(
                " ".join(f"{x:.2f}" for x in r["loadavg_before"]), " ".join(f"{x:.2f}" for x in r["loadavg_after"])
            ),
            f"cores: {c['cpu_count']} (usable {c['usable']})",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="measured rounds, each one A and one B (default 15)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first (default 1)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--llm", help="agent-server's --llm (default: the scripted model), e.g. openai:m")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0:
        parser.error("--rounds must be >= 1 and --warmup >= 0")
    global LLM
    LLM = args.llm
    ensure_bytecode()  # as an installed copy has it (see `_jsonrpc.ensure_bytecode`)
    result = anyio.run(run, args.rounds, args.warmup)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
