"""Where start time goes: `python -X importtime` of agent-server versus the bare SDK baseline, paired.

Two modes:

* `start` (default): the real start path. `python -X importtime -m agent_server --workspace ... --state-dir ...
  --llm script:...` and `python -X importtime bench/baseline_server.py`, each with stdin at EOF, so each process
  imports everything it needs to serve, serves nothing and exits.
* `import`: `-c "import agent_server.server.app"` versus `-c "import mcp.server.mcpserver"`.

Rounds alternate AB/BA. For every module the per-round self time is taken, and the median over rounds is used.
Figures are shares of the process's own total import time and the ratio of the two totals, never absolute
times (the machines are shared and noisy).

    python bench/importtime.py [--mode start|import] [--rounds 5] [--top 12] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _jsonrpc import ensure_bytecode  # noqa: E402

BENCH_DIR = Path(__file__).resolve().parent
BASELINE_SERVER = BENCH_DIR / "baseline_server.py"
AGENT = "agent-server"
BASELINE = "baseline"
TIMEOUT_S = 120


@dataclass(frozen=True)
class Entry:
    self_us: int
    cumulative_us: int


def parse_importtime(stderr: str) -> dict[str, Entry]:
    """`import time: self | cumulative | name` lines -> {module: Entry}; other stderr lines are ignored."""
    out: dict[str, Entry] = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "[us]" in line:
            continue
        self_us, cumulative_us, name = line.split(":", 1)[1].split("|")
        out[name.strip()] = Entry(int(self_us), int(cumulative_us))
    return out


def commands(mode: str, tmp: Path) -> dict[str, list[str]]:
    py = [sys.executable, "-X", "importtime"]
    if mode == "import":
        return {
            AGENT: [*py, "-c", "import agent_server.server.app"],
            BASELINE: [*py, "-c", "import mcp.server.mcpserver"],
        }
    script = tmp / "script.json"
    script.write_text(json.dumps({"responses": [{"content": "hi"}]}), encoding="utf-8")
    (tmp / "workspace").mkdir(exist_ok=True)
    agent = [*py, "-m", "agent_server", "--workspace", str(tmp / "workspace"), "--state-dir", str(tmp / "state")]
    return {AGENT: [*agent, "--llm", f"script:{script}"], BASELINE: [*py, str(BASELINE_SERVER)]}


def run_once(argv: list[str], cwd: Path) -> dict[str, Entry]:
    proc = subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=cwd, timeout=TIMEOUT_S, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return parse_importtime(proc.stderr)


def median_entries(runs: list[dict[str, Entry]]) -> dict[str, Entry]:
    names = {name for run in runs for name in run}
    return {
        name: Entry(
            int(statistics.median(run[name].self_us if name in run else 0 for run in runs)),
            int(statistics.median(run[name].cumulative_us if name in run else 0 for run in runs)),
        )
        for name in names
    }


def share(part: float, total: float) -> float:
    return round(100.0 * part / total, 1) if total else 0.0


def by_package(entries: dict[str, Entry], total: float, top: int) -> list[tuple[str, float]]:
    sums: dict[str, int] = defaultdict(int)
    for name, e in entries.items():
        sums[name.split(".")[0].lstrip("_") or name] += e.self_us
    ranked = sorted(sums.items(), key=lambda kv: -kv[1])[:top]
    return [(pkg, share(us, total)) for pkg, us in ranked]


def top_cumulative(entries: dict[str, Entry], total: float, top: int) -> list[tuple[str, float]]:
    ranked = sorted(entries.items(), key=lambda kv: -kv[1].cumulative_us)[:top]
    return [(name, share(e.cumulative_us, total)) for name, e in ranked]


def measure(mode: str, rounds: int, top: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Entry]]] = {AGENT: [], BASELINE: []}
    with tempfile.TemporaryDirectory(prefix="bench-importtime-") as tmp_name:
        tmp = Path(tmp_name)
        argv = commands(mode, tmp)
        for i in range(rounds):
            for name in [AGENT, BASELINE] if i % 2 == 0 else [BASELINE, AGENT]:
                runs[name].append(run_once(argv[name], tmp))
    totals = {name: [sum(e.self_us for e in run.values()) for run in rs] for name, rs in runs.items()}
    ratio = statistics.median(a / b for a, b in zip(totals[AGENT], totals[BASELINE], strict=True))
    agent, base = median_entries(runs[AGENT]), median_entries(runs[BASELINE])
    agent_total = sum(e.self_us for e in agent.values())
    base_total = sum(e.self_us for e in base.values())
    extra = {name: e for name, e in agent.items() if name not in base}
    extra_top = sorted(extra.items(), key=lambda kv: -kv[1].self_us)[:top]
    return {
        "mode": mode,
        "rounds": rounds,
        "commands": {name: " ".join(a) for name, a in argv.items()},
        "modules": {AGENT: len(agent), BASELINE: len(base)},
        "ratio": round(ratio, 3),
        "only_in_agent_server": {
            "modules": len(extra),
            "share_pct": share(sum(e.self_us for e in extra.values()), agent_total),
            "by_package_pct": by_package(extra, agent_total, top),
            "top_self_pct": [(name, share(e.self_us, agent_total)) for name, e in extra_top],
        },
        "by_package_pct": {AGENT: by_package(agent, agent_total, top), BASELINE: by_package(base, base_total, top)},
        "top_cumulative_pct": {
            AGENT: top_cumulative(agent, agent_total, top),
            BASELINE: top_cumulative(base, base_total, top),
        },
    }


def _pcts(pairs: list[tuple[str, float]]) -> str:
    return ", ".join(f"{name} {pct:.1f}%" for name, pct in pairs)


def render(r: dict[str, Any]) -> str:
    extra = r["only_in_agent_server"]
    lines = [
        f"import time (python -X importtime, mode {r['mode']}), {r['rounds']} rounds alternating AB/BA, medians",
        f"modules imported: agent-server {r['modules'][AGENT]}, baseline {r['modules'][BASELINE]}",
        f"import-time ratio (agent-server / baseline): {r['ratio']:.2f}",
        f"only in agent-server: {extra['modules']} modules, {extra['share_pct']:.1f}% of its import time",
        f"  by package: {_pcts(extra['by_package_pct'])}",
        f"  top modules (self): {_pcts(extra['top_self_pct'])}",
    ]
    for name in (AGENT, BASELINE):
        lines.append(f"by package (self time), {name}: {_pcts(r['by_package_pct'][name])}")
    for name in (AGENT, BASELINE):
        lines.append(f"top cumulative, {name} (% of its import time):")
        lines += [f"  {pct:5.1f}%  {mod}" for mod, pct in r["top_cumulative_pct"][name]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--mode", choices=["start", "import"], default="start", help="what to import (default start)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, each one A and one B (default 5)")
    parser.add_argument("--top", type=int, default=12, help="entries per list (default 12)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.top < 1:
        parser.error("--rounds and --top must be >= 1")
    ensure_bytecode()  # as an installed copy has it (see `_jsonrpc.ensure_bytecode`)
    result = measure(args.mode, args.rounds, args.top)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
