"""Where a `run_turn` spends its time: a summary of a py-spy raw profile of the agent-server process.

Take the profile while `whole_turn.py` runs (py-spy cannot run the server as its child: the child's stdout is
the wire, and py-spy prints there), then summarise it:

    python bench/whole_turn.py --rounds 8000 --warmup 200 --pid-file /tmp/agent.pid &
    sleep 3; py-spy record -r 1000 -f raw --nonblocking -d 20 --pid "$(cat /tmp/agent.pid)" -o turn.txt; wait
    python bench/pyspy_summary.py turn.txt [--top 25]

Samples of the event-loop (main) thread are split into idle (in `epoll`) and busy; busy ones are grouped by the
request or task they run under (the `run_turn` request, the untimed `session_create`, the SDK's request path
outside the handler, its stdin reader and stdout writer, and the loop's own callbacks), and those under the
`run_turn` request again by what they do. Worker-thread samples are grouped by the work they run. Frames are
matched by name only, so the summary holds for a profile of this code base; `--top` lists the frames with the
most inclusive samples inside the `run_turn` request as well (agent-server's own frames).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

IDLE_LEAF = "EpollSelector.select"
WORKER_ROOT = "Thread._bootstrap"
OWNERS = [
    ("run_turn request (handler and its tool task)", ("run_turn (agent_server/server/turn_tools.py", "run_tool_round")),
    ("session_create request (untimed in the bench)", ("session_create (agent_server/server/session_tools.py",)),
    ("SDK request path outside the handler (dispatch, otel, serialise)", ("_handle_request", "_on_request")),
    ("SDK stdout writer task", ("stdout_writer",)),
    ("SDK stdin reader task (over doors.stdio.LineReader)", ("stdin_reader",)),
]
OTHER_OWNER = "event loop itself: callbacks, thread wake-ups, scheduling"
HOP = "handing work to a worker thread (to_thread.run_sync: limiter, queue.put, notify)"
# What a sample under the run_turn request does, by a frame among its innermost six; first match wins.
DOING = [
    ("EventStreamer", "EventStreamer (events; no progress token sent)"),
    ("BaseModel.", "pydantic model build, dump or validate"),
    ("TypeAdapter.", "pydantic model build, dump or validate"),
    ("JSONEncoder", "json encode/decode"),
    ("JSONDecoder", "json encode/decode"),
    ("ScriptedLLM", "scripted model"),
    ("estimate_", "token estimates"),
]
WORKER_DOING = [
    ("Condition.wait", "idle: waiting for work"),
    ("sqlite", "SQLite store"),
    ("_list_dir", "list_dir tool"),
    ("build_prompt_parts", "build_prompt_parts (system prompt files)"),
    ("readline", "SDK stdin readline"),
    ("call_soon_threadsafe", "waking the event loop"),
]


def read_samples(path: Path) -> list[tuple[list[str], int]]:
    """(frames outermost first, count) per line of py-spy's raw (collapsed-stack) output."""
    samples: list[tuple[list[str], int]] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if stack and count.isdigit():
            samples.append((stack.split(";"), int(count)))
    return samples


def _first(table: list[tuple[str, str]], frames: list[str], default: str) -> str:
    return next((label for key, label in table if any(key in f for f in frames)), default)


def _owner(stack: str) -> str:
    return next((label for label, keys in OWNERS if any(k in stack for k in keys)), OTHER_OWNER)


def summarise(samples: list[tuple[list[str], int]]) -> dict[str, Counter[str]]:
    out: dict[str, Counter[str]] = {k: Counter() for k in ("main", "owner", "turn", "turn_frames", "worker")}
    for frames, n in samples:
        if frames[0].startswith(WORKER_ROOT):
            out["worker"][_first(WORKER_DOING, frames[-1:] if "Condition.wait" in frames[-1] else frames, "glue")] += n
            continue
        if frames[-1].startswith(IDLE_LEAF):
            out["main"]["idle"] += n
            continue
        out["main"]["busy"] += n
        owner = _owner(";".join(frames))
        out["owner"][owner] += n
        if owner == OWNERS[0][0]:
            hop = any("run_sync_in_worker_thread" in f or "CapacityLimiter" in f for f in frames)
            out["turn"][HOP if hop else _first(DOING, frames[-6:], "own frames, anyio/asyncio glue")] += n
            for name in {re.sub(r":\d+\)$", ")", f) for f in frames}:
                out["turn_frames"][name] += n
    return out


def _own(frame: str) -> bool:
    """agent-server's own frames, less the start-up ones every sample has."""
    return "agent_server/" in frame and not any(k in frame for k in ("__main__.py", "cli.py"))


def _rows(counter: Counter[str], total: int, what: str) -> list[str]:
    return [f"  {n:7d} {100 * n / max(total, 1):5.1f}% of {what}  {label}" for label, n in counter.most_common()]


def render(s: dict[str, Counter[str]], top: int) -> str:
    busy, idle = s["main"]["busy"], s["main"]["idle"]
    turn = s["owner"][OWNERS[0][0]]
    workers = sum(s["worker"].values())
    frames = Counter({k: v for k, v in s["turn_frames"].items() if _own(k)})
    return "\n".join(
        [
            f"event-loop thread: {busy + idle} samples, busy {busy}, idle in epoll {idle}",
            "busy samples by the request or task they run under:",
            *_rows(s["owner"], busy, "busy"),
            f"inside the run_turn request ({turn} samples), by what they do:",
            *_rows(s["turn"], turn, "run_turn"),
            f"worker threads: {workers} samples",
            *_rows(s["worker"], workers, "worker"),
            f"top {top} agent-server frames inside the run_turn request (inclusive samples):",
            *_rows(Counter(dict(frames.most_common(top))), turn, "run_turn"),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("profile", type=Path, help="py-spy raw output (record -f raw)")
    parser.add_argument("--top", type=int, default=25, help="frames to list inside the run_turn request")
    args = parser.parse_args(argv)
    print(render(summarise(read_samples(args.profile)), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
