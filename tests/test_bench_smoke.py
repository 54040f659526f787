"""Smoke test for bench/: every script runs once with tiny sizes, exits 0 and prints every figure's label.

Each figure's script runs in one test only; `run_all.py` is checked to list every one of them (running it would
run them all again). No timing assertions: the figures themselves are for bench/README.md, not for CI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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


def run(script: str, *args: str, timeout_s: float = 120) -> str:
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout_s,
        check=False,
    )
    assert proc.returncode == 0, f"{script} {args} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def assert_labels(out: str, labels: list[str]) -> None:
    missing = [label for label in labels if label not in out]
    assert not missing, f"missing {missing} in:\n{out}"


PROVIDER_LABELS = [
    "provider overhead (streaming):",
    "provider overhead (non_streaming):",
    "ratio",
    "per model call by API (streaming, ratio to openai chat completions): openai",
    "per model call by API (non_streaming, ratio to openai chat completions): openai",
    "anthropic",
    "openai-responses",
]
CACHE_LABELS = [
    "prompt caching over a",
    "round 2:",
    "read share",
    "input tokens billed per turn, cached:",
    "input tokens billed per turn, uncached:",
    "ratio (cached / uncached):",
    "load average (1/5/15 min):",
    "cores:",
]


MACHINE_LABELS = ["load average (1/5/15 min):", "cores:"]
TOOL_ROUND_LABELS = [
    "one tool round inside run_turn",
    "baseline per tools/call (median):",
    "agent-server per tool round, with progress (median):",
    "agent-server per tool round, without progress (median):",
    "ratio (agent-server / baseline), with progress:",
    "ratio (agent-server / baseline), without progress:",
    "goal: <= 1.5x:",
    *MACHINE_LABELS,
]
PERSISTENCE_LABELS = [
    "per-turn persistence cost",
    "per turn in the big store",
    "per turn in the small store",
    "ratio (big / small):",
    "median of per-round ratios:",
    "goal: <= 1.3x:",
    "context, load_history at the start of a turn",
    *MACHINE_LABELS,
]
CONCURRENCY_LABELS = [
    "concurrent run_turn on",
    "concurrent turns wall (median):",
    "baseline anyio.sleep(L) wall (median):",
    "ratio (turns wall / L):",
    "one turn alone wall / L:",
    "goal: <= 1.3x:",
    *MACHINE_LABELS,
]
IDLE_RSS_LABELS = [
    "idle RSS after initialize",
    "agent-server VmRSS (median):",
    "baseline VmRSS (median):",
    "difference:",
    "ratio (agent-server / baseline):",
    "goal: <= 1.2x:",
    *MACHINE_LABELS,
]
TOKEN_STREAM_LABELS = [
    "token events streamed per second",
    "agent-server token deltas delivered/s (median):",
    "agent-server notifications/s (median):",
    "baseline notifications/s (median):",
    "ratio (agent-server deltas/s / baseline notifications/s):",
    "notifications/s ratio, for context:",
    "goal: >= 0.8x:",
    *MACHINE_LABELS,
]
MOUNTED_CALL_LABELS = [
    "a mounted tool call through run_turn",
    "turn with one mounted call (median):",
    "turn without a tool (median):",
    "mounted call's own cost",
    "direct SDK call (median):",
    "direct raw JSON-RPC call, for context (median):",
    "ratio (turn with one mounted call / direct SDK call):",
    "marginal ratio",
    "goal: <= 2.2x:",
    *MACHINE_LABELS,
]
RELAY_PROGRESS_LABELS = [
    "relayed progress from a mounted server",
    "relay notifications/s (median):",
    "direct notifications/s (median):",
    "relay progress units/s (median):",
    "direct progress units/s (median):",
    "ratio (relay / direct progress units/s):",
    "goal: >= 0.5x:",
    "agent-server RSS",
    "RSS last - start:",
    *MACHINE_LABELS,
]
WHOLE_TURN_LABELS = [
    "a whole run_turn with one no-op tool round",
    "agent-server run_turn, one tool round (median):",
    "baseline tools/call echo (median):",
    "ratio (run_turn / echo):",
    "ratio over blocks of",
    "goal: <= 2x:",
    *MACHINE_LABELS,
]
FIRST_TURN_LABELS = [
    "spawn to the first completed run_turn",
    "agent-server spawn to first run_turn result (median):",
    "baseline spawn to first echo result (median):",
    "ratio (agent-server / baseline):",
    "goal: <= 1.1x:",
    *MACHINE_LABELS,
]
ONE_ROUND = ["--rounds", "1", "--warmup", "0"]
# Each issue-6 and issue-12 figure's script with tiny sizes, and the labels its text output must contain.
RUNTIME_HOPS_LABELS = [
    "as shipped vs to_thread inline",
    "per turn, as shipped (1 worker-thread hop):",
    "per turn, every hop run inline (what-if):",
    "one hop in a turn:",
    *MACHINE_LABELS,
]
APPROVAL_GATE_LABELS = [
    "an allowed call through the approval gate",
    "gate off (read-only tool), per turn (median):",
    "remembered allow_session, per turn (median):",
    "asked, answered allow_once at once, per turn (median):",
    "ratio (remembered / off):",
    "ratio (asked / off):",
    "goal: <= 1.1x:",
    *MACHINE_LABELS,
]
END_OF_INPUT_LABELS = [
    "end of input (stdin closed) to exit",
    "agent-server --protocol acp, exit after end of input (median):",
    "agent-server (MCP), exit after end of input (median):",
    "baseline (MCP), exit after end of input (median):",
    "ratio (agent-server MCP / baseline):",
    "goal: ACP <= 100 ms",
    *MACHINE_LABELS,
]
HTTP_LOAD_LABELS = [
    "a burst of 3 concurrent one-call run_turn over Streamable HTTP",
    "modern, sqlite x1:",
    "handshake, sqlite x1:",
    "handshake-per-turn, sqlite x1:",
    "wall / ideal (median):",
    "server CPU per turn (median):",
    "latency p50 / ideal:",
    "failures: 0 of 3",
    *MACHINE_LABELS,
]
LONG_SESSION_LABELS = [
    "turns 1-2: ",
    "turns 3-4: ",
    "last block / first block: ",
    *MACHINE_LABELS,
]
LOOP_LAG_LABELS = [
    "event-loop lag (1 ms ticker)",
    "lag, plain turns:",
    "lag, one turn a round with a 64 KiB crafted argument:",
    "loop held per callback (CPU):",
    "goal: p99 <= 1.0 ms and max <= 5.0 ms:",
    *MACHINE_LABELS,
]
TINY: dict[str, tuple[list[str], list[str]]] = {
    "tool_round.py": ([*ONE_ROUND, "--big", "3", "--small", "1", "--calls", "3"], TOOL_ROUND_LABELS),
    "persistence.py": ([*ONE_ROUND, "--big", "60", "--small", "10", "--batch", "3"], PERSISTENCE_LABELS),
    "concurrency.py": ([*ONE_ROUND, "--turns", "3", "--delay", "0.05"], CONCURRENCY_LABELS),
    "idle_rss.py": ([*ONE_ROUND, "--settle", "0"], IDLE_RSS_LABELS),
    "token_stream.py": ([*ONE_ROUND, "--deltas", "200", "--events"], TOKEN_STREAM_LABELS),
    "mounted_call.py": ([*ONE_ROUND, "--turns", "2"], MOUNTED_CALL_LABELS),
    "relay_progress.py": ([*ONE_ROUND, "--n", "50"], RELAY_PROGRESS_LABELS),
    "whole_turn.py": ([*ONE_ROUND, "--blocks", "2"], WHOLE_TURN_LABELS),
    "first_turn.py": (ONE_ROUND, FIRST_TURN_LABELS),
    "approval_gate.py": (["--rounds", "1", "--warmup", "0", "--turns", "2"], APPROVAL_GATE_LABELS),
    "runtime_hops.py": (["--rounds", "1", "--turns", "2"], RUNTIME_HOPS_LABELS),
    "end_of_input.py": ([*ONE_ROUND, "--settle", "0"], END_OF_INPUT_LABELS),
    "http_load.py": (
        [
            *ONE_ROUND,
            "--turns",
            "3",
            "--delay",
            "0.05",
            "--scenario=modern",
            "--scenario=handshake",
            "--scenario=handshake-per-turn",
        ],
        HTTP_LOAD_LABELS,
    ),
    "loop_lag.py": ([*ONE_ROUND, "--turns", "2", "--hostile-kb", "64"], LOOP_LAG_LABELS),
    "long_session.py": (["--turns", "4", "--block", "2"], LONG_SESSION_LABELS),
}


def run_together(jobs: dict[str, list[str]]) -> dict[str, str]:
    """Run several bench scripts at once (they are independent; no timing is asserted); their stdouts.

    `jobs` maps a name whose first word is the script to its arguments.
    """
    procs = {
        name: subprocess.Popen(
            [sys.executable, str(BENCH / name.split()[0]), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        for name, args in jobs.items()
    }
    outs: dict[str, str] = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"{name} exited {proc.returncode}\n{stdout}\n{stderr}"
        outs[name] = stdout
    return outs


SMOKED_ELSEWHERE = {
    "first_turn_instructions.py",
    "spawn.py",
    "importtime.py",
    "code_size.py",
    "provider_overhead.py",
    "cache_savings.py",
    "tracing_cost.py",
}
"""The figures' scripts whose smoke tests are below (the others are in `TINY`)."""
NOT_FIGURES = {
    "run_all.py",
    "baseline_server.py",
    "baseline_http_server.py",
    "pyspy_summary.py",
    "mounted_result_size.py",
    "store_turn.py",
    "bounds.py",
}
"""Scripts that run_all does not run: itself, the baselines, a profile reader, two with their own smoke tests below,
and the before/after comparisons run by hand at two commits (`bounds.py`)."""


def test_run_all_lists_every_figures_script_with_the_rounds_asked_for() -> None:
    listed = [line.split() for line in run("run_all.py", "--rounds", "1", "--warmup", "0", "--list").splitlines()]
    scripts = [Path(command[1]).name for command in listed]
    assert len(scripts) == len(set(scripts))
    assert set(scripts) == set(TINY) | SMOKED_ELSEWHERE
    on_disk = {p.name for p in BENCH.glob("*.py") if not p.name.startswith("_")}
    assert on_disk - set(scripts) == NOT_FIGURES, "a new bench script needs run_all and a smoke test"
    assert all(command[0] == sys.executable for command in listed)
    spawn = next(command for command in listed if command[1].endswith("spawn.py"))
    assert spawn[2:] == ["--rounds", "1", "--warmup", "0"]


def test_the_model_api_benches_tiny_sizes() -> None:
    outs = run_together(
        {
            "cache_savings.py": ["--rounds", "3", "--result-chars", "200"],
            "provider_overhead.py": ["--calls", "3", "--rounds", "1"],
        }
    )
    assert_labels(outs["cache_savings.py"], ["prompt caching over a 3-round turn", *CACHE_LABELS])
    assert_labels(outs["provider_overhead.py"], PROVIDER_LABELS)


def test_issue6_scripts_tiny_sizes() -> None:
    """Every label at tiny sizes; `--json` once (persistence.py, in-process and cheapest: the renderers differ only)."""
    jobs = {script: args for script, (args, _) in TINY.items()}
    jobs["persistence.py --json"] = [*TINY["persistence.py"][0], "--json"]
    jobs["whole_turn.py --progress"] = [*TINY["whole_turn.py"][0], "--progress"]
    outs = run_together(jobs)
    for script, (_, labels) in TINY.items():
        assert_labels(outs[script], labels)
    assert "with progress token" in outs["whole_turn.py --progress"]  # it also checks that notifications came
    r: dict[str, Any] = json.loads(outs["persistence.py --json"])
    for key in ("big_median_s", "small_median_s", "ratio", "goal", "goal_met", "loadavg_before", "loadavg_after"):
        assert key in r, f"persistence.py --json lacks {key}"
    assert r["turns_in_measured_session_after"] == {"big": 60, "small": 10}


def test_spawn_text_and_json() -> None:
    outs = run_together({"spawn.py": ONE_ROUND, "spawn.py --json": [*ONE_ROUND, "--json"]})
    assert_labels(outs["spawn.py"], SPAWN_LABELS)
    r: dict[str, Any] = json.loads(outs["spawn.py --json"])
    for key in ("agent_server_median_s", "baseline_median_s", "ratio", "paired_ratio_median", "loadavg_before"):
        assert key in r
    assert r["cores"]["cpu_count"] >= 1
    assert r["tools"]["baseline"] == 1 and r["tools"]["agent-server"] >= 1


def test_first_turn_instructions_counts_both_sides_to_the_result() -> None:
    # valgrind runs both servers about 50 times slower: the one bench smoke test that takes about a minute.
    if shutil.which("callgrind_control") is None:
        if os.environ.get("AGENT_SERVER_REQUIRE_VALGRIND") == "1":
            pytest.fail("valgrind is not installed and AGENT_SERVER_REQUIRE_VALGRIND=1")
        pytest.skip("valgrind is not installed (Debian's valgrind package)")
    r: dict[str, Any] = json.loads(run("first_turn_instructions.py", "--json", timeout_s=900))
    counts = r["instructions"]
    assert counts["baseline"] > 10**8 and counts["agent-server"] > counts["baseline"]  # a start is ~10^9
    assert r["ratio"] == round(counts["agent-server"] / counts["baseline"], 3)


def test_importtime_text_and_import_mode_json() -> None:
    outs = run_together(
        {"importtime.py": ["--rounds", "1"], "importtime.py --json": ["--mode", "import", "--rounds", "1", "--json"]}
    )
    assert_labels(outs["importtime.py"], IMPORTTIME_LABELS)
    r: dict[str, Any] = json.loads(outs["importtime.py --json"])
    assert r["modules"]["agent-server"] > 0 and r["modules"]["baseline"] > 0
    assert "ratio" in r and "only_in_agent_server" in r


def test_code_size_text_and_json() -> None:
    assert_labels(run("code_size.py"), CODE_SIZE_LABELS)
    r: dict[str, Any] = json.loads(run("code_size.py", "--json"))
    assert r["modules"]["longest"][0]["lines"] >= r["modules"]["median"]
    assert r["functions"]["longest"][0]["lines"] >= r["functions"]["p90"]


def test_mounted_result_size_prints_its_figures() -> None:
    out = run("mounted_result_size.py", "--size", "100000")
    labels = ["mounted result of 100000 characters", "RSS growth:", "state.db growth:", "estimated history tokens:"]
    assert_labels(out, labels)


def test_pyspy_summary_groups_samples(tmp_path: Path) -> None:
    """A tiny py-spy raw file: idle, a turn's thread hop, a turn's own frame, the stdout writer, a worker."""
    loop = "main (agent_server/cli.py:61);BaseEventLoop._run_once (asyncio/base_events.py:1922)"
    turn = f"{loop};run_turn (agent_server/server/turn_tools.py:101)"
    lines = [
        f"{loop};EpollSelector.select (selectors.py:468) 7",
        f"{turn};AsyncIOBackend.run_sync_in_worker_thread (anyio/_backends/_asyncio.py:2779) 3",
        f"{turn};drive (agent_server/agent/loop.py:50) 1",
        f"{loop};stdio_server.<locals>.stdout_writer (mcp/server/stdio.py:80) 2",
        "Thread._bootstrap (threading.py:1002);Condition.wait (threading.py:327) 5",
        "not a sample line",
    ]
    profile = tmp_path / "turn.txt"
    profile.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = run("pyspy_summary.py", str(profile))
    assert_labels(
        out,
        [
            "event-loop thread: 13 samples, busy 6, idle in epoll 7",
            "4  66.7% of busy  run_turn request",
            "2  33.3% of busy  SDK stdout writer task",
            "3  75.0% of run_turn  handing work to a worker thread",
            "1  25.0% of run_turn  own frames",
            "5 100.0% of worker  idle: waiting for work",
            "4 100.0% of run_turn  run_turn (agent_server/server/turn_tools.py)",
        ],
    )


def test_the_postgresql_benches_tiny_sizes() -> None:
    """`persistence.py --store` and `store_turn.py` on the test database (skipped without one, see tests/pg)."""
    from tests.pg import server_url

    url = server_url()
    outs = run_together(
        {
            "persistence.py --store": [*TINY["persistence.py"][0], "--store", url, "--json"],
            "store_turn.py": ["--store", url, "--rounds", "2", "--warmup", "0"],
        }
    )
    r: dict[str, Any] = json.loads(outs["persistence.py --store"])
    assert "PostgresStore" in r["measure"]
    assert r["turns_in_measured_session_after"] == {"big": 60, "small": 10}
    assert_labels(
        outs["store_turn.py"], ["per turn on PostgreSQL", "per turn on SQLite", "ratio (PostgreSQL / SQLite):"]
    )


TRACING_COST_LABELS = [
    "otel extra installed but unconfigured vs absent",
    "per turn (median): installed",
    "spawn to tools/list (median): installed",
    "ratio per turn (installed / absent):",
    "ratio per turn (on / absent):",
    "ratio spawn (installed / absent):",
    "goal: <= 1.05x:",
    *MACHINE_LABELS,
]


def test_tracing_cost_tiny_sizes() -> None:
    out = run("tracing_cost.py", "--rounds", "1", "--warmup", "0", "--turns", "1")
    assert_labels(out, TRACING_COST_LABELS)
