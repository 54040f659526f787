"""Per-turn persistence cost when the store holds 10,000 turns versus when it holds 100, paired.

In-process, `SqliteStore` directly (as the server uses it: every call goes through a worker thread). Two
stores in two state dirs are pre-filled, one with `--small` turns and one with `--big` turns, written straight
into the schema in one transaction each (so pre-filling 10,000 turns takes a second, not minutes); the rows
are the same JSON the store writes. Then each round times a batch of `--batch` turns on each store,
alternating which store goes first: per turn, `begin_turn` (the `running` record) then `finish_turn` (the
final record, with a tool round, two model calls and usage, and four history messages: user, assistant with
a tool call, tool result, answer). Per-turn cost = batch time / batch. After each batch the turns it added
are deleted again (untimed), so each store keeps its size for the whole run.

By default every pre-filled turn and every measured turn is in one session (`--sessions 1`): the worst case
for the per-session queries (the head of the message sequence, the session's turn rows). `--sessions N`
spreads the pre-filled turns over N sessions; the measured turns go to the last one.

The pre-filled sessions look compacted: a summary, and every message but the last 8 archived (what `compact`
leaves with the default `compact_keep_last`). A second figure, for context (no goal in the issue), is the other
store access every turn makes: `load_history` at the start of the turn (one read per store per round, same
alternation), which returns the summary and the 8 live messages.

`--store postgresql://...` measures `PostgresStore` instead (needs the `postgres` extra): each store gets a
schema of its own in that database (created, and dropped at the end), pre-filled the same way.

    python bench/persistence.py [--rounds 15] [--batch 50] [--big 10000] [--small 100] [--sessions 1] [--json]
                                [--store postgresql://...]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _jsonrpc import goal_line, goal_met, loadavg, machine, machine_lines  # noqa: E402

from agent_server.store.base import SessionStore  # noqa: E402
from agent_server.store.sqlite import SqliteStore  # noqa: E402
from agent_server.types import (  # noqa: E402
    AssistantTurn,
    Message,
    TextPart,
    ToolCall,
    ToolResult,
    ToolRound,
    Transition,
    TurnRecord,
    Usage,
    new_id,
    utc_now,
)

GOAL = 1.3
KEEP_LIVE = 8
LISTING = "\n".join(f"src/module_{i:02d}.py {1000 + 37 * i}" for i in range(20))
ANSWER = "The workspace has 20 Python modules under src/, the largest is module_19.py (1703 bytes). " * 3


def turn(session_id: str) -> tuple[TurnRecord, TurnRecord, list[Message]]:
    """A realistic turn: (the `running` record, the final record, the four history messages)."""
    turn_id = new_id("turn")
    call = ToolCall(id="call_1", name="list_dir", arguments={"path": "src"})
    result = ToolResult(call_id="call_1", name="list_dir", content=[TextPart(text=LISTING)], duration_s=0.0012)
    started = utc_now()
    running = TurnRecord(
        turn_id=turn_id,
        session_id=session_id,
        trace_id=new_id("trace"),
        status="running",
        prompt="What is in src/ and which file is the largest?",
        started_at=started,
    )
    steps = [
        ("sampling", "executing_tools", "assistant_requested_tools"),
        ("executing_tools", "post_tool_decision", "tool_round_completed"),
        ("post_tool_decision", "sampling", "runtime_continuation_after_tools"),
        ("sampling", "finalizing", "assistant_finished_without_tools"),
    ]
    final = running.model_copy(
        update={
            "status": "completed",
            "final_text": ANSWER,
            "assistant_turns": [
                AssistantTurn(phase="initial", text="Let me look.", tool_calls=[call]),
                AssistantTurn(phase="followup_1", text=ANSWER),
            ],
            "tool_rounds": [ToolRound(tool_round=1, requested_tools=[call], tool_results=[result])],
            "transitions": [Transition.model_validate({"from": a, "to": b, "reason": r}) for a, b, r in steps],
            "usage": Usage(prompt_tokens=2400, completion_tokens=180, total_tokens=2580),
            "finished_at": utc_now(),
        }
    )
    messages = [
        Message(role="user", content=running.prompt),
        Message(role="assistant", content="Let me look.", tool_calls=[call]),
        Message(role="tool", tool_call_id="call_1", name="list_dir", content=LISTING),
        Message(role="assistant", content=ANSWER),
    ]
    return running, final, messages


def _dump(model: Any) -> str:
    return json.dumps(model.model_dump(mode="json", by_alias=True), ensure_ascii=False)


class SqliteBench:
    """A `SqliteStore` in its own state dir, and the raw SQL the bench needs around it."""

    kind = "SqliteStore"

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir

    async def open(self) -> SessionStore:
        self.store = await SqliteStore.open(self.state_dir)
        return self.store

    def owner(self) -> tuple[str, ...]:
        return (self.store.instance_id,)

    async def write(
        self, turn_rows: list[tuple[Any, ...]], msg_rows: list[tuple[Any, ...]], seq: dict[str, int]
    ) -> None:
        await anyio.to_thread.run_sync(_sqlite_write, self.state_dir, turn_rows, msg_rows, seq)

    async def marks(self, session_id: str) -> tuple[int, int]:
        return await anyio.to_thread.run_sync(_marks, self.state_dir, session_id)

    async def truncate(self, session_id: str, marks: tuple[int, int]) -> None:
        await anyio.to_thread.run_sync(_truncate, self.state_dir, session_id, marks)

    async def size(self) -> int:
        return (self.state_dir / "state.db").stat().st_size

    async def drop(self) -> None:
        return None


class PostgresBench:
    """A `PostgresStore` whose tables are in a schema of its own in the `--store` database."""

    kind = "PostgresStore"

    def __init__(self, url: str, name: str) -> None:
        self.url = url
        self.schema = f"bench_{name}_{new_id('s')[2:].lower()}"

    async def _sql(self, sql: str, params: Any = None, *, in_schema: bool = True) -> list[tuple[Any, ...]]:
        import psycopg

        url = self.scoped() if in_schema else self.url
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            cur = await conn.execute(sql.encode(), params)
            return await cur.fetchall() if cur.description else []

    def scoped(self) -> str:
        return f"{self.url}{'&' if '?' in self.url else '?'}options=-csearch_path%3D{self.schema}"

    async def open(self) -> SessionStore:
        from agent_server.store.postgres import PostgresStore

        await self._sql(f"CREATE SCHEMA {self.schema}", in_schema=False)
        self.store = await PostgresStore.open(self.scoped())
        return self.store

    def owner(self) -> tuple[Any, ...]:
        return (self.store.instance_id, self.store.owner_key)

    async def write(
        self, turn_rows: list[tuple[Any, ...]], msg_rows: list[tuple[Any, ...]], seq: dict[str, int]
    ) -> None:
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.scoped()) as conn:
            async with conn.cursor() as cur:
                async with cur.copy(
                    "COPY turns (session_id, turn_id, status, record, owner, owner_key) FROM STDIN"
                ) as cp:
                    for row in turn_rows:
                        await cp.write_row(row)
                async with cur.copy("COPY messages (session_id, seq, turn_id, message) FROM STDIN") as cp:
                    for row in msg_rows:
                        await cp.write_row(row)
                for session_id, head in seq.items():
                    await cur.execute(
                        "UPDATE messages SET archived = true WHERE session_id = %s AND seq <= %s",
                        (session_id, head - KEEP_LIVE),
                    )
                    await cur.execute("UPDATE sessions SET summary = %s WHERE session_id = %s", (ANSWER, session_id))
            await conn.commit()
            await conn.execute("ANALYZE")

    async def marks(self, session_id: str) -> tuple[int, int]:
        rows = await self._sql(
            "SELECT (SELECT coalesce(max(ordinal), 0) FROM turns),"
            " (SELECT coalesce(max(seq), 0) FROM messages WHERE session_id = %s)",
            (session_id,),
        )
        return rows[0][0], rows[0][1]

    async def truncate(self, session_id: str, marks: tuple[int, int]) -> None:
        await self._sql("DELETE FROM turns WHERE ordinal > %s", (marks[0],))
        await self._sql("DELETE FROM messages WHERE session_id = %s AND seq > %s", (session_id, marks[1]))

    async def size(self) -> int:
        rows = await self._sql(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
            (self.schema,),
        )
        return int(rows[0][0])

    async def drop(self) -> None:
        await self._sql(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE", in_schema=False)


Bench = SqliteBench | PostgresBench


async def prefill(bench: Bench, turns: int, sessions: int) -> tuple[SessionStore, str]:
    """A store holding `turns` completed turns over `sessions` sessions; returns it and the last session."""
    store = await bench.open()
    ids = [(await store.create_session(title=f"bench {i}", metadata={})).session_id for i in range(sessions)]
    _, final, messages = turn(ids[0])
    record_json = json.loads(_dump(final))
    message_rows = [_dump(m) for m in messages]
    turn_rows: list[tuple[Any, ...]] = []
    msg_rows: list[tuple[Any, ...]] = []
    seq = dict.fromkeys(ids, 0)
    for i in range(turns):
        session_id = ids[i * sessions // max(turns, 1)]
        turn_id = new_id("turn")
        record = {**record_json, "turn_id": turn_id, "session_id": session_id, "trace_id": new_id("trace")}
        turn_rows.append((session_id, turn_id, "completed", json.dumps(record, ensure_ascii=False), *bench.owner()))
        for text in message_rows:
            seq[session_id] += 1
            msg_rows.append((session_id, seq[session_id], turn_id, text))

    await bench.write(turn_rows, msg_rows, seq)
    total = sum([(await store.get_session(s)).turn_count for s in ids])
    if total != turns:
        raise RuntimeError(f"pre-fill wrote {total} turns, expected {turns}")
    return store, ids[-1]


def _sqlite_write(
    state_dir: Path, turn_rows: list[tuple[Any, ...]], msg_rows: list[tuple[Any, ...]], seq: dict[str, int]
) -> None:
    conn = sqlite3.connect(state_dir / "state.db", timeout=30, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO turns (session_id, turn_id, status, record, owner) VALUES (?, ?, ?, ?, ?)", turn_rows
        )
        conn.executemany("INSERT INTO messages (session_id, seq, turn_id, message) VALUES (?, ?, ?, ?)", msg_rows)
        for session_id, head in seq.items():  # as compaction leaves a session: a summary, the last 8 live
            conn.execute(
                "UPDATE messages SET archived = 1 WHERE session_id = ? AND seq <= ?", (session_id, head - KEEP_LIVE)
            )
            conn.execute("UPDATE sessions SET summary = ? WHERE session_id = ?", (ANSWER, session_id))
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def _marks(state_dir: Path, session_id: str) -> tuple[int, int]:
    conn = sqlite3.connect(state_dir / "state.db", timeout=30)
    try:
        ordinal = conn.execute("SELECT coalesce(max(ordinal), 0) FROM turns").fetchone()[0]
        seq = conn.execute("SELECT coalesce(max(seq), 0) FROM messages WHERE session_id = ?", (session_id,)).fetchone()[
            0
        ]
        return ordinal, seq
    finally:
        conn.close()


def _truncate(state_dir: Path, session_id: str, marks: tuple[int, int]) -> None:
    """Delete what a batch added (turn rows after the ordinal mark, messages after the seq mark)."""
    conn = sqlite3.connect(state_dir / "state.db", timeout=30, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("DELETE FROM turns WHERE ordinal > ?", (marks[0],))
        conn.execute("DELETE FROM messages WHERE session_id = ? AND seq > ?", (session_id, marks[1]))
        conn.execute("COMMIT")
    finally:
        conn.close()


async def timed_batch(store: SessionStore, bench: Bench, session_id: str, batch: int) -> float:
    """Seconds per turn (begin + finish) over `batch` turns; the batch's rows are removed afterwards."""
    turns = [turn(session_id) for _ in range(batch)]
    marks = await bench.marks(session_id)
    start = time.perf_counter()
    for running, final, messages in turns:
        await store.begin_turn(running)
        if not await store.finish_turn(final, messages):
            raise RuntimeError("finish_turn wrote nothing")
    elapsed = time.perf_counter() - start
    await bench.truncate(session_id, marks)
    return elapsed / batch


async def timed_history(store: SessionStore, session_id: str) -> float:
    """Seconds for one `load_history` (what a turn reads first)."""
    start = time.perf_counter()
    history = await store.load_history(session_id)
    elapsed = time.perf_counter() - start
    if len(history.messages) > KEEP_LIVE or history.summary is None:
        raise RuntimeError(f"expected a compacted session, got {len(history.messages)} live messages")
    return elapsed


async def run(
    rounds: int, warmup: int, batch: int, big: int, small: int, sessions: int, store_url: str | None = None
) -> dict[str, Any]:
    info = machine()
    per_turn: dict[str, list[float]] = {"big": [], "small": []}
    history: dict[str, list[float]] = {"big": [], "small": []}
    with tempfile.TemporaryDirectory(prefix="bench-persistence-") as tmp_name:
        tmp = Path(tmp_name)
        benches: dict[str, Bench] = {
            name: SqliteBench(tmp / name) if store_url is None else PostgresBench(store_url, name)
            for name in ("big", "small")
        }
        started = time.perf_counter()
        stores = {name: await prefill(benches[name], n, sessions) for name, n in (("big", big), ("small", small))}
        prefill_s = time.perf_counter() - started
        try:
            for i in range(warmup + rounds):
                for name in ("big", "small") if i % 2 == 0 else ("small", "big"):
                    store, session_id = stores[name]
                    sample = await timed_batch(store, benches[name], session_id, batch)
                    if i >= warmup:
                        per_turn[name].append(sample)
                for name in ("small", "big") if i % 2 == 0 else ("big", "small"):
                    store, session_id = stores[name]
                    sample = await timed_history(store, session_id)
                    if i >= warmup:
                        history[name].append(sample)
            held = {name: (await s.get_session(sid)).turn_count for name, (s, sid) in stores.items()}
            db_bytes = {name: await b.size() for name, b in benches.items()}
        finally:
            for store, _ in stores.values():
                await store.close()
            for b in benches.values():
                await b.drop()
    big_median = statistics.median(per_turn["big"])
    small_median = statistics.median(per_turn["small"])
    paired = [b / s for b, s in zip(per_turn["big"], per_turn["small"], strict=True)]
    ratio = big_median / small_median
    history_medians = {name: statistics.median(values) for name, values in history.items()}
    return {
        "measure": f"per-turn persistence cost ({benches['big'].kind} begin_turn + finish_turn, 4 messages),"
        " in-process",
        "rounds": rounds,
        "warmup": warmup,
        "batch": batch,
        "big_turns": big,
        "small_turns": small,
        "sessions": sessions,
        "turns_in_measured_session_after": held,
        "db_bytes": db_bytes,
        "prefill_s": round(prefill_s, 2),
        "order": "alternating big/small first per round; each batch's rows deleted after it",
        "big_per_turn_s": [round(x, 6) for x in per_turn["big"]],
        "small_per_turn_s": [round(x, 6) for x in per_turn["small"]],
        "big_median_s": round(big_median, 6),
        "small_median_s": round(small_median, 6),
        "ratio": round(ratio, 3),
        "paired_ratio_median": round(statistics.median(paired), 3),
        "goal": f"<= {GOAL}",
        "goal_met": goal_met(ratio, GOAL),
        "history_load_s": {name: [round(x, 6) for x in values] for name, values in history.items()},
        "history_load_median_s": {name: round(value, 6) for name, value in history_medians.items()},
        "history_load_ratio": round(history_medians["big"] / history_medians["small"], 2),
        **info,
        "loadavg_after": loadavg(),
    }


def render(r: dict[str, Any]) -> str:
    mib = {k: v / 2**20 for k, v in r["db_bytes"].items()}
    ms = {k: v * 1e3 for k, v in r["history_load_median_s"].items()}
    return "\n".join(
        [
            r["measure"],
            f"rounds: {r['rounds']} (+{r['warmup']} warm-up) of {r['batch']} turns per store, {r['order']}",
            f"stores: {r['big_turns']} vs {r['small_turns']} turns over {r['sessions']} session(s)"
            f" (database {mib['big']:.1f} vs {mib['small']:.1f} MiB, pre-fill {r['prefill_s']:.1f} s)",
            f"per turn in the big store ({r['big_turns']} turns), median: {r['big_median_s'] * 1e6:.0f} us",
            f"per turn in the small store ({r['small_turns']} turns), median: {r['small_median_s'] * 1e6:.0f} us",
            f"ratio (big / small): {r['ratio']:.2f}",
            f"median of per-round ratios: {r['paired_ratio_median']:.2f}",
            goal_line(r["ratio"], GOAL),
            "context, load_history at the start of a turn (compacted session, 8 live messages), median:"
            f" big {ms['big']:.1f} ms, small {ms['small']:.1f} ms, ratio {r['history_load_ratio']:.1f} (no goal)",
            *machine_lines(r),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="measured rounds (default 15)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first (default 1)")
    parser.add_argument("--batch", type=int, default=50, help="turns timed per store per round (default 50)")
    parser.add_argument("--big", type=int, default=10_000, help="turns in the big store (default 10000)")
    parser.add_argument("--small", type=int, default=100, help="turns in the small store (default 100)")
    parser.add_argument("--sessions", type=int, default=1, help="sessions the pre-filled turns are spread over")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--store", metavar="URL", help="measure PostgresStore on this postgresql:// database")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0 or args.batch < 1 or args.small < 0 or args.big < args.small:
        parser.error("need --rounds >= 1, --warmup >= 0, --batch >= 1 and 0 <= --small <= --big")
    if args.sessions < 1:
        parser.error("--sessions must be >= 1")
    result = anyio.run(run, args.rounds, args.warmup, args.batch, args.big, args.small, args.sessions, args.store)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
