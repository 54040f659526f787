"""Issue 10 bounds, before/after figures (run at two commits to compare; not ratios, not timed tests).

    python bench/bounds.py regex [--pattern P] [--cap S]   # search_text over README.md, and a second
                                                           # connection's session_list while it runs
    python bench/bounds.py line [--megabytes N]            # a mounted stdio server answers with one long line
    python bench/bounds.py flood [--megabytes N]           # ... writes N MB without a newline

Every wait is capped (`--cap`, default 60 s): a figure of "none" means the thing did not happen within it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from agent_server.types import ToolCall

REPO = Path(__file__).resolve().parent.parent
FLOOD = REPO / "tests" / "fakes" / "mcp_flood.py"


async def regex_figures(pattern: str, cap: float) -> None:
    from agent_server.llm.scripted import ScriptedLLM
    from agent_server.server.app import create_server
    from agent_server.settings import Settings

    tmp = Path(tempfile.mkdtemp())
    (tmp / "ws").mkdir()
    shutil.copy(REPO / "README.md", tmp / "ws" / "README.md")
    script = [{"tool_calls": [{"name": "search_text", "arguments": {"pattern": pattern}}]}, {"content": "done"}]
    server = create_server(Settings(workspace=tmp / "ws", state_dir=tmp / "state"), llm=ScriptedLLM(script))
    searching = anyio.Event()
    found: dict[str, Any] = {}

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if message == "search_text: started":
            searching.set()

    async def turn(client: Client) -> None:
        started = time.monotonic()
        await client.call_tool("run_turn", {"prompt": "search"}, progress_callback=on_progress)
        found["turn_s"] = time.monotonic() - started

    with anyio.move_on_after(cap):
        async with Client(server) as first, Client(server) as second, anyio.create_task_group() as tg:
            tg.start_soon(turn, first)
            await searching.wait()
            started = time.monotonic()
            await second.call_tool("session_list", {})
            found["list_s"] = time.monotonic() - started
            found["list_during_turn"] = "turn_s" not in found
    print(f"pattern {pattern!r} over README.md, cap {cap:g} s")
    print(f"run_turn answered after: {_seconds(found.get('turn_s'))}")
    print(f"other connection's session_list answered after: {_seconds(found.get('list_s'))}")
    print(f"session_list answered while the search ran: {found.get('list_during_turn', False)}")


async def stdio_figures(kind: str, megabytes: int, cap: float) -> None:
    from agent_server.mounts.config import MountConfig
    from agent_server.mounts.toolset import MountManager

    config = MountConfig(name="f", command=sys.executable, args=[str(FLOOD)], timeout_s=cap)
    async with MountManager([config]) as manager:
        await manager.wait_started()
        before = peak = _rss_mib()
        started = time.monotonic()
        elapsed: float | None = None
        text = ""

        async def watch_rss() -> None:
            nonlocal peak
            while True:
                peak = max(peak, _rss_mib())
                await anyio.sleep(0.05)

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch_rss)
            with anyio.move_on_after(cap):
                result = await manager.call_tool(
                    ToolCall(id="c", name=f"f__{kind}", arguments={"megabytes": megabytes})
                )
                elapsed, text = time.monotonic() - started, result.text()
            tg.cancel_scope.cancel()
        print(f"{kind} {megabytes} MB: call answered after {_seconds(elapsed)} (cap {cap:g} s)")
        print(f"result: {text[:160]!r}{' ...' if len(text) > 160 else ''} ({len(text)} characters)")
        print(f"agent-side RSS: {before:.0f} MiB before, {peak:.0f} MiB at the peak")
        print(f"server state: {manager.states()[0]['state']}")


def _rss_mib() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096 / 2**20


def _seconds(value: float | None) -> str:
    return "none" if value is None else f"{value:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["regex", "line", "flood"])
    parser.add_argument("--pattern", default=r"(.*?,){20}X")
    parser.add_argument("--megabytes", type=int, default=None, help="line: 19 (a 40 MB line), flood: 200")
    parser.add_argument("--cap", type=float, default=60.0)
    args = parser.parse_args()
    if args.what == "regex":
        anyio.run(regex_figures, args.pattern, args.cap)
    else:
        megabytes = args.megabytes or (19 if args.what == "line" else 200)
        anyio.run(stdio_figures, args.what, megabytes, args.cap)


if __name__ == "__main__":
    main()
