"""From end of input to exit: how long an idle server takes to leave once its client closes stdin.

Editors and hosts close the agent's stdin when they are done with it and wait only briefly before they kill it
(acpx sends SIGTERM 100 ms later). Each sample is a fresh process: the handshake (ACP: `initialize` and
`session/new`; MCP: `initialize`, `notifications/initialized` and `tools/list`), `--settle` seconds of idling
(the store is open, the turn machinery loaded), then stdin is closed and the time until the process has
exited is taken. The baseline is `bench/baseline_server.py` (a bare SDK server) under the MCP handshake. The
order rotates every round; the figures are medians.

    python bench/end_of_input.py [--rounds 7] [--warmup 1] [--settle 0.5] [--json]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _jsonrpc import (  # noqa: E402
    PROTOCOL_VERSION,
    agent_argv,
    baseline_argv,
    goal_met,
    loadavg,
    machine,
    machine_lines,
    median,
    write_script,
)

GOAL_MS = 100.0
ACP, MCP, BASELINE = "agent-server --protocol acp", "agent-server (MCP)", "baseline (MCP)"


def _send(stdin: IO[bytes], message: dict[str, Any]) -> None:
    stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
    stdin.flush()


def _answer(stdout: IO[bytes], request_id: int) -> dict[str, Any]:
    while True:
        message = json.loads(stdout.readline() or b"null")
        if message is None:
            raise RuntimeError("the server closed stdout before answering")
        if message.get("id") == request_id:
            return message


def _handshake(name: str, proc: subprocess.Popen[bytes], workspace: Path) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    if name == ACP:
        _send(proc.stdin, {"id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
        _answer(proc.stdout, 1)
        _send(proc.stdin, {"id": 2, "method": "session/new", "params": {"cwd": str(workspace), "mcpServers": []}})
        _answer(proc.stdout, 2)
        return
    params = {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}
    _send(proc.stdin, {"id": 1, "method": "initialize", "params": params})
    _answer(proc.stdout, 1)
    _send(proc.stdin, {"method": "notifications/initialized"})
    _send(proc.stdin, {"id": 2, "method": "tools/list"})
    _answer(proc.stdout, 2)


def exit_ms(name: str, argv: list[str], workspace: Path, settle: float) -> float:
    """Milliseconds from closing the stdin of a fresh, idle server to its exit."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        _handshake(name, proc, workspace)
        time.sleep(settle)
        assert proc.stdin is not None
        start = time.perf_counter()
        proc.stdin.close()
        if proc.wait(timeout=30) != 0:
            raise RuntimeError(f"{name} exited {proc.returncode}")
        return (time.perf_counter() - start) * 1000
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def run(rounds: int, warmup: int, settle: float) -> dict[str, Any]:
    info = machine()
    samples: dict[str, list[float]] = {ACP: [], MCP: [], BASELINE: []}
    with tempfile.TemporaryDirectory(prefix="bench-eoi-") as tmp_name:
        tmp = Path(tmp_name)
        workspace = tmp / "workspace"
        workspace.mkdir()
        script = write_script(tmp / "script.json", [{"content": "Hello."}])
        names = list(samples)
        for i in range(warmup + rounds):
            argv = {
                ACP: agent_argv(workspace, tmp / f"state-acp-{i}", script, "--protocol", "acp"),
                MCP: agent_argv(workspace, tmp / f"state-mcp-{i}", script),
                BASELINE: baseline_argv(),
            }
            for name in names[i % 3 :] + names[: i % 3]:
                ms = exit_ms(name, argv[name], workspace, settle)
                if i >= warmup:
                    samples[name].append(ms)
    medians = {name: median(values) for name, values in samples.items()}
    return {
        "measure": "end of input (stdin closed) to exit, idle, fresh process per sample",
        "rounds": rounds,
        "warmup": warmup,
        "settle_s": settle,
        "samples_ms": {name: [round(v, 1) for v in values] for name, values in samples.items()},
        "median_ms": {name: round(value, 1) for name, value in medians.items()},
        "goal": f"ACP <= {GOAL_MS:g} ms",
        "goal_met": goal_met(medians[ACP], GOAL_MS),
        **info,
        "loadavg_after": loadavg(),
    }


def render(r: dict[str, Any]) -> str:
    m = r["median_ms"]
    return "\n".join(
        [
            r["measure"],
            f"rounds: {r['rounds']} (+{r['warmup']} warm-up), order rotating, {r['settle_s']:g} s idle first",
            f"{ACP}, exit after end of input (median): {m[ACP]:.0f} ms",
            f"{MCP}, exit after end of input (median): {m[MCP]:.0f} ms",
            f"{BASELINE}, exit after end of input (median): {m[BASELINE]:.0f} ms",
            f"ratio (agent-server MCP / baseline): {m[MCP] / m[BASELINE]:.2f}",
            f"goal: ACP <= {GOAL_MS:g} ms (acpx's wait before SIGTERM): {'met' if r['goal_met'] else 'NOT met'}",
            *machine_lines(r),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="measured rounds, one sample of each (default 7)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first (default 1)")
    parser.add_argument("--settle", type=float, default=0.5, help="seconds idle before stdin closes (default 0.5)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0 or args.settle < 0:
        parser.error("need --rounds >= 1, --warmup >= 0 and --settle >= 0")
    result = run(args.rounds, args.warmup, args.settle)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
