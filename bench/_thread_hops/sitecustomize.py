"""Bench experiment: worker-thread hops in the agent-server process.

Loaded only with `PYTHONPATH=<absolute path of bench/_thread_hops>` (absolute: the bench spawns its servers in a
temp dir).

With `BENCH_THREADS` set, `anyio.to_thread.run_sync` is wrapped in the agent-server process only (not in the
baseline or the bench driver, which get the same PYTHONPATH): every call is counted and timed by what it runs,
and `BENCH_THREADS_OUT` gets one line per callable at exit (calls, mean wall microseconds per call as the
awaiting task sees it, how much of it the callable itself took, name). Modes:

* `count`: only count;
* `inline-store`: run the SQLite store's calls (`SqliteStore._locked`) on the event loop instead;
* `inline-tools`: run the built-in tools and `build_prompt_parts` on the event loop instead;
* `inline-all`: both.

The inline modes are what-if measurements (how much of a turn the hops cost), not a proposed design: running
SQLite or file-system calls on the event loop can hold it. Example (the figures in bench/README.md):

    PYTHONPATH=$PWD/bench/_thread_hops BENCH_THREADS=inline-all BENCH_THREADS_OUT=/tmp/hops.txt \\
        python bench/whole_turn.py --rounds 3000
"""

from __future__ import annotations

import atexit
import os
import sys
import time
from collections import Counter
from typing import Any

MODES = ("count", "inline-store", "inline-tools", "inline-all")


def _name(fn: Any, args: tuple[Any, ...]) -> str:
    name = getattr(fn, "__qualname__", repr(fn))
    if name.endswith("_locked") and args:
        name += ":" + getattr(args[0], "__qualname__", "?")
    return name


def _inline(mode: str, name: str) -> bool:
    store = "SqliteStore._locked" in name
    tools = name.startswith("WorkspaceToolset.") or "build_prompt_parts" in name
    return (store and mode in ("inline-store", "inline-all")) or (tools and mode in ("inline-tools", "inline-all"))


def _install(mode: str, out: str) -> None:
    import anyio.to_thread

    real = anyio.to_thread.run_sync
    calls: Counter[str] = Counter()
    spent: Counter[str] = Counter()
    inside: Counter[str] = Counter()

    def timed(name: str, fn: Any) -> Any:
        def run(*args: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args)
            finally:
                inside[name] += time.perf_counter() - start

        return run

    async def run_sync(fn: Any, *args: Any, **kwargs: Any) -> Any:
        name = _name(fn, args)
        calls[name] += 1
        start = time.perf_counter()
        try:
            work = timed(name, fn)
            return work(*args) if _inline(mode, name) else await real(work, *args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - start

    anyio.to_thread.run_sync = run_sync

    @atexit.register
    def _dump() -> None:
        with open(out, "w", encoding="utf-8") as f:
            for name, n in calls.most_common():
                wall, work = spent[name] / n * 1e6, inside[name] / n * 1e6
                f.write(f"{n:8d} {wall:8.0f} us/call {work:8.0f} us of it the work itself  {name}\n")


_MODE = os.environ.get("BENCH_THREADS")
if _MODE and "agent_server" in sys.orig_argv:
    if _MODE not in MODES:
        raise SystemExit(f"BENCH_THREADS must be one of {', '.join(MODES)}")
    _install(_MODE, os.environ.get("BENCH_THREADS_OUT", "thread-hops.txt"))
