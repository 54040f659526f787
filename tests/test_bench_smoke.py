"""Smoke test for bench/: every script runs with tiny sizes, exits 0 and prints every figure's label.

No timing assertions: the figures themselves are for bench/README.md, not for CI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"

SPAWN_LABELS = [
    "spawn to first tools/list result",
    "agent-server median:",
    "baseline median:",
    "ratio (agent-server / baseline):",
    "median of per-round ratios:",
    "load average (1/5/15 min):",
    "cores:",
]
IMPORTTIME_LABELS = [
    "import-time ratio (agent-server / baseline):",
    "only in agent-server:",
    "by package (self time), agent-server:",
    "by package (self time), baseline:",
    "top cumulative, agent-server",
    "top cumulative, baseline",
]
CODE_SIZE_LABELS = [
    "longest module:",
    "longest function:",
    "module lines median:",
    "function lines median:",
]


def run(script: str, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"{script} {args} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def assert_labels(out: str, labels: list[str]) -> None:
    missing = [label for label in labels if label not in out]
    assert not missing, f"missing {missing} in:\n{out}"


PROVIDER_LABELS = ["provider overhead (streaming):", "provider overhead (non_streaming):", "ratio"]


def test_run_all_prints_every_figure() -> None:
    out = run("run_all.py", "--rounds", "1", "--warmup", "0")
    assert_labels(out, ["bench run", *SPAWN_LABELS, *IMPORTTIME_LABELS, *CODE_SIZE_LABELS, *PROVIDER_LABELS])


def test_spawn_json() -> None:
    r: dict[str, Any] = json.loads(run("spawn.py", "--rounds", "1", "--warmup", "0", "--json"))
    for key in ("agent_server_median_s", "baseline_median_s", "ratio", "paired_ratio_median", "loadavg_before"):
        assert key in r
    assert r["cores"]["cpu_count"] >= 1
    assert r["tools"]["baseline"] == 1 and r["tools"]["agent-server"] >= 1


def test_importtime_import_mode_json() -> None:
    r: dict[str, Any] = json.loads(run("importtime.py", "--mode", "import", "--rounds", "1", "--json"))
    assert r["modules"]["agent-server"] > 0 and r["modules"]["baseline"] > 0
    assert "ratio" in r and "only_in_agent_server" in r


def test_code_size_json() -> None:
    r: dict[str, Any] = json.loads(run("code_size.py", "--json"))
    assert r["modules"]["longest"][0]["lines"] >= r["modules"]["median"]
    assert r["functions"]["longest"][0]["lines"] >= r["functions"]["p90"]
