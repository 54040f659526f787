"""Load over Streamable HTTP: a burst of concurrent one-call `run_turn`s against the model delay L.

Servers: `python -m agent_server --transport streamable-http` processes kept up for the whole run, each with a
scripted model that answers every call with "ok" after `delay_s` = L (`when_exhausted: cycle`). A *variant* is one
configuration of them: by default one replica on SQLite; `--store URL` adds `--replicas` replicas sharing one
PostgreSQL schema (created and dropped here; the client spreads the turns over them round-robin, as a load
balancer would); `--against DIR` adds the same single SQLite replica run from another source tree (its
`agent_server` first on `PYTHONPATH`), to compare code before and after a change. `--auth` gives every server
bearer tokens (`auth.tokens`) and the client its token, so the auth middleware in front of `/mcp` is measured.

The client is `_http_raw.py` (HTTP/1.1 over anyio sockets, no client SDK: the SDK client saturates before the
server does). A burst is `--turns` turns sent at once, each on a TCP connection of its own, in one *scenario*:

- `modern`: one 2026-07-28 `tools/call` (`run_turn`, `session_id: "new"`), no MCP session;
- `handshake`: handshake era (2025-11-25), every turn of the burst on one MCP session per replica (opened
  untimed once): "all on one connection";
- `handshake-per-turn`: each turn opens its own MCP session (`initialize`, `notifications/initialized`), calls,
  and ends it (`DELETE`), all timed: "one connection per turn".

Each call carries a progress token (a client showing progress; `--no-progress` for none). Per burst: the wall
time to the last answer, each turn's latency, failures (a transport error, an HTTP status other than 200, a
JSON-RPC error or a turn not `completed`) and the servers' CPU (user + system from `/proc/<pid>/stat`, every
thread). Each round runs every scenario on every variant, the variants' order rotating every round. Figures:
medians over the rounds of wall / L, turns/s and CPU ms per turn; p50/p99 latency / L over all measured turns;
failures summed; and each variant's wall and CPU against the first's (ratios).

    python bench/http_load.py [--turns 200] [--delay 0.2] [--rounds 3] [--warmup 1]
        [--scenario modern|handshake|handshake-per-turn ...] [--store URL [--replicas 2]] [--against DIR]
        [--auth] [--no-progress] [--json] [--pid-file PATH]

With `handshake-per-turn`, which opens an MCP session per turn, all for one principal, each server (but
`--against`'s, which may predate the setting) allows `max(64, --turns + 1)` of them (`limits.mcp_sessions`; the
one more is the `handshake` scenario's session, open all along); without it the config is one any version reads
(run the whole bench with `PYTHONPATH=<old tree>` to measure that one).
To profile a server: `--rounds 20 --pid-file /tmp/http.pids &` (a line per server: its pid, its variant), then
`py-spy record -r 250 -f raw --nonblocking -d 20 --pid "$(head -1 /tmp/http.pids | cut -d' ' -f1)" -o http.txt`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _http_raw import Connection, HttpFailure, Reply  # noqa: E402
from _jsonrpc import RpcServer, agent_argv, loadavg, machine, machine_lines  # noqa: E402

HOST = "127.0.0.1"
BASELINE = Path(__file__).resolve().parent / "baseline_http_server.py"
MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
SCENARIOS = ("modern", "handshake", "handshake-per-turn")
TOKEN = "bench-token-0123456789abcdef"
CLIENT_INFO = {"name": "http-load", "version": "0"}
START_TIMEOUT_S = 60.0
TURN_TIMEOUT_S = 120.0
CLOCK_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


@dataclass
class Variant:
    label: str
    store: str | None = None
    replicas: int = 1
    pythonpath: str | None = None
    kind: str = "agent"
    """`agent` (agent-server over HTTP), `baseline` (`baseline_http_server.py`) or `stdio` (agent-server over stdio)."""


@dataclass
class Replica:
    port: int
    process: Process
    session: str | None = None
    """The handshake scenario's MCP session on this replica."""
    stdio: RpcServer | None = None
    """The stdio variant's driver (and no port)."""


@dataclass
class Burst:
    wall_s: float
    cpu_s: float
    client_cpu_s: float
    latencies_s: list[float]
    failures: list[str]


@dataclass
class Figures:
    bursts: list[Burst] = field(default_factory=list[Burst])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * CLOCK_TICK_S  # utime, stime (fields 14 and 15)


def _client_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _headers(auth: bool, version: str) -> dict[str, str]:
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": version,
    }
    if auth:
        headers["Authorization"] = f"Bearer {TOKEN}"
    return headers


class Load:
    """The servers of every variant, and the turns the bursts send them."""

    def __init__(self, tmp: Path, args: argparse.Namespace) -> None:
        self.tmp = tmp
        self.args = args
        self.replicas: dict[str, list[Replica]] = {}
        self._next_id = 0
        self._rr = 0

    def _script(self) -> Path:
        (self.tmp / "workspace").mkdir(exist_ok=True)
        script = self.tmp / "script.json"
        if not script.exists():
            answer = {"content": "ok", "delay_s": self.args.delay}
            script.write_text(json.dumps({"responses": [answer], "when_exhausted": "cycle"}))
        return script

    def _argv(self, name: str, variant: Variant, port: int) -> list[str]:
        if variant.kind == "baseline":
            return [sys.executable, str(BASELINE), "--host", HOST, "--port", str(port), "--delay", str(self.args.delay)]
        workspace, script = self.tmp / "workspace", self._script()
        config: dict[str, Any] = {"log_level": "WARNING"}
        if "handshake-per-turn" in self.args.scenario and variant.pythonpath is None:  # room for a burst of them
            config["limits"] = {"mcp_sessions": max(64, self.args.turns + 1)}  # + the `handshake` scenario's
        if self.args.auth:
            config["auth"] = {"tokens": {"bench": "sha256:" + hashlib.sha256(TOKEN.encode()).hexdigest()}}
        config_path = self.tmp / f"config-{name}.json"
        config_path.write_text(json.dumps(config))
        argv = [sys.executable, "-m", "agent_server", "--workspace", str(workspace)]
        argv += ["--state-dir", str(self.tmp / f"state-{name}"), "--llm", f"script:{script}"]
        argv += ["--config", str(config_path), "--transport", "streamable-http", "--host", HOST, "--port", str(port)]
        if variant.store is not None:
            argv += ["--store", variant.store]
        return argv

    async def start(self, stack: AsyncExitStack, variant: Variant, errlog: Any) -> None:
        if variant.kind == "stdio":
            argv = agent_argv(self.tmp / "workspace", self.tmp / "state-stdio", self._script())
            driver = await stack.enter_async_context(RpcServer.spawn(argv, self.tmp, name="agent-server stdio"))
            self.replicas[variant.label] = [Replica(0, driver.process, stdio=driver)]
            await self._call_stdio(self.replicas[variant.label][0])
            return
        env = dict(os.environ)
        if variant.pythonpath is not None:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [variant.pythonpath, env.get("PYTHONPATH")]))
        started: list[Replica] = []
        for i in range(variant.replicas):
            port = _free_port()
            argv = self._argv(f"{variant.label}-{i}".replace(" ", "_"), variant, port)
            process = await anyio.open_process(
                argv, env=env, cwd=self.tmp, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog
            )
            stack.push_async_callback(_stop, process)
            started.append(Replica(port, process))
        for replica in started:
            await _wait_listening(replica)
        if self.args.pid_file is not None:  # a line per server: its pid, its variant
            with open(self.args.pid_file, "a") as pids:  # noqa: ASYNC230 - a line, before any timing
                pids.writelines(f"{r.process.pid} {variant.label}\n" for r in started)
        self.replicas[variant.label] = started
        for replica in started:  # untimed: the first turn loads the turn machinery
            await self._call_modern(replica)
            await self._call_modern(replica)

    # --- one turn per scenario ---------------------------------------------------------------

    def _request(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self._next_id += 1
        return self._next_id, {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}

    def _call_params(self, meta: dict[str, Any]) -> dict[str, Any]:
        if not self.args.no_progress:
            meta = {**meta, "progressToken": f"p{self._next_id + 1}"}
        return {"name": "run_turn", "arguments": {"prompt": "say ok", "session_id": "new"}, "_meta": meta}

    async def _call_modern(self, replica: Replica) -> None:
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
        }
        request_id, message = self._request("tools/call", self._call_params(meta))
        headers = {**_headers(self.args.auth, MODERN), "Mcp-Method": "tools/call", "Mcp-Name": "run_turn"}
        connection = await Connection.open(HOST, replica.port)
        try:
            reply = await connection.post("/mcp", message, headers, on_message=_is_response(request_id))
        finally:
            await connection.aclose()
        _check_turn(reply, request_id)

    async def _call_stdio(self, replica: Replica) -> None:
        assert replica.stdio is not None
        progress = None if self.args.no_progress else (lambda _params: None)
        arguments = {"prompt": "say ok", "session_id": "new"}
        result = await replica.stdio.call_tool("run_turn", arguments, on_progress=progress)
        status = result["structuredContent"]["status"]
        if status != "completed":
            raise HttpFailure(f"turn {status}")

    async def _open_session(self, connection: Connection) -> str:
        params = {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": CLIENT_INFO}
        request_id, message = self._request("initialize", params)
        reply = await connection.post(
            "/mcp", message, _headers(self.args.auth, HANDSHAKE), on_message=_is_response(request_id)
        )
        session = reply.headers.get("mcp-session-id")
        if reply.status != 200 or session is None:
            raise HttpFailure(f"initialize: HTTP {reply.status} {reply.messages}")
        headers = {**_headers(self.args.auth, HANDSHAKE), "Mcp-Session-Id": session}
        done = await connection.post("/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
        if done.status != 202:
            raise HttpFailure(f"notifications/initialized: HTTP {done.status}")
        return session

    async def _call_in_session(self, connection: Connection, session: str) -> None:
        request_id, message = self._request("tools/call", self._call_params({}))
        headers = {**_headers(self.args.auth, HANDSHAKE), "Mcp-Session-Id": session}
        reply = await connection.post("/mcp", message, headers, on_message=_is_response(request_id))
        _check_turn(reply, request_id)

    async def _call_handshake(self, replica: Replica) -> None:
        assert replica.session is not None
        connection = await Connection.open(HOST, replica.port)
        try:
            await self._call_in_session(connection, replica.session)
        finally:
            await connection.aclose()

    async def _call_per_turn(self, replica: Replica) -> None:
        connection = await Connection.open(HOST, replica.port)
        try:
            session = await self._open_session(connection)
            await self._call_in_session(connection, session)
            headers = {**_headers(self.args.auth, HANDSHAKE), "Mcp-Session-Id": session}
            ended = await connection.post("/mcp", None, headers, method="DELETE")
            if ended.status != 200:
                raise HttpFailure(f"DELETE: HTTP {ended.status}")
        finally:
            await connection.aclose()

    async def prepare(self, scenario: str, label: str) -> None:
        if scenario != "handshake":
            return
        for replica in self.replicas[label]:
            if replica.session is None and replica.stdio is None:
                connection = await Connection.open(HOST, replica.port)
                try:
                    replica.session = await self._open_session(connection)
                finally:
                    await connection.aclose()

    def turn(self, scenario: str, label: str) -> Callable[[], Awaitable[None]]:
        replicas = self.replicas[label]
        replica = replicas[self._rr % len(replicas)]
        self._rr += 1
        calls = {"modern": self._call_modern, "handshake": self._call_handshake}
        call = self._call_stdio if replica.stdio is not None else calls.get(scenario, self._call_per_turn)
        return lambda: call(replica)

    async def burst(self, scenario: str, label: str) -> Burst:
        await self.prepare(scenario, label)
        pids = [replica.process.pid for replica in self.replicas[label]]
        turns = [self.turn(scenario, label) for _ in range(self.args.turns)]
        latencies: list[float] = []
        failures: list[str] = []

        async def one(call: Callable[[], Awaitable[None]]) -> None:
            start = time.perf_counter()
            try:
                with anyio.fail_after(TURN_TIMEOUT_S):
                    await call()
            except Exception as exc:  # noqa: BLE001 - every failure is counted, none ends the burst
                failures.append(f"{type(exc).__name__}: {exc}"[:300])
            else:
                latencies.append(time.perf_counter() - start)

        cpu_before, client_before = sum(map(_cpu_s, pids)), _client_cpu_s()
        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for call in turns:
                tg.start_soon(one, call)
        wall = time.perf_counter() - start
        cpu = sum(map(_cpu_s, pids)) - cpu_before
        return Burst(wall, cpu, _client_cpu_s() - client_before, latencies, failures)


def _is_response(request_id: int) -> Callable[[dict[str, Any]], bool]:
    return lambda message: message.get("id") == request_id and ("result" in message or "error" in message)


def _check_turn(reply: Reply, request_id: int) -> None:
    if reply.status != 200:
        raise HttpFailure(f"HTTP {reply.status}: {reply.messages}")
    answer = next((m for m in reply.messages if m.get("id") == request_id), None)
    if answer is None or "result" not in answer:
        raise HttpFailure(f"no result: {answer}")
    status = (answer["result"].get("structuredContent") or {}).get("status")
    if status != "completed":
        raise HttpFailure(f"turn {status}: {answer['result'].get('content')}")


async def _wait_listening(replica: Replica) -> None:
    with anyio.fail_after(START_TIMEOUT_S):
        while True:
            if replica.process.returncode is not None:
                raise RuntimeError(f"a server exited with {replica.process.returncode} before listening")
            try:
                stream = await anyio.connect_tcp(HOST, replica.port)
            except OSError:
                await anyio.sleep(0.05)
                continue
            await stream.aclose()
            return


async def _stop(process: Process) -> None:
    with anyio.CancelScope(shield=True):
        if process.returncode is None:
            process.terminate()
            with anyio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


@asynccontextmanager
async def _pg_schema(url: str | None) -> AsyncGenerator[str | None]:
    if url is None:
        yield None
        return
    from persistence import PostgresBench

    pg = PostgresBench(url, "http")
    await pg.open()
    await pg.store.close()
    try:
        yield pg.scoped()
    finally:
        await pg.drop()


def variants(args: argparse.Namespace, scoped: str | None) -> list[Variant]:
    found = [Variant("sqlite x1")]
    if args.baseline:
        found.append(Variant("bare SDK server", kind="baseline"))
    if args.stdio:
        found.append(Variant("sqlite x1 over stdio", kind="stdio"))
    if scoped is not None:
        found.append(Variant(f"postgresql x{args.replicas}", store=scoped, replicas=args.replicas))
    if args.against is not None:
        found.append(Variant("sqlite x1 (against)", pythonpath=str(Path(args.against).resolve())))
    return found


async def run(args: argparse.Namespace) -> dict[str, Any]:
    info = machine()
    figures: dict[tuple[str, str], Figures] = {}
    with tempfile.TemporaryDirectory(prefix="bench-http-load-") as tmp_name, tempfile.TemporaryFile() as errlog:
        try:
            async with _pg_schema(args.store) as scoped, AsyncExitStack() as stack:
                found = variants(args, scoped)
                load = Load(Path(tmp_name), args)
                for variant in found:
                    await load.start(stack, variant, errlog)
                for i in range(args.warmup + args.rounds):
                    order = found[i % len(found) :] + found[: i % len(found)]
                    for scenario in args.scenario:
                        for variant in order:
                            burst = await load.burst(scenario, variant.label)
                            if i >= args.warmup:
                                figures.setdefault((scenario, variant.label), Figures()).bursts.append(burst)
        except Exception:
            errlog.seek(0)
            sys.stderr.write(errlog.read().decode(errors="replace")[-4000:])
            raise
    return summarise(args, [v.label for v in found], figures) | {**info, "loadavg_after": loadavg()}


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summarise(args: argparse.Namespace, labels: list[str], figures: dict[tuple[str, str], Figures]) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    order = {label: i for i, label in enumerate(labels)}
    for (scenario, label), fig in sorted(
        figures.items(), key=lambda kv: (args.scenario.index(kv[0][0]), order[kv[0][1]])
    ):
        latencies = [x for b in fig.bursts for x in b.latencies_s]
        failures = [f for b in fig.bursts for f in b.failures]
        rows.append(
            {
                "scenario": scenario,
                "variant": label,
                "wall_over_ideal": round(statistics.median(b.wall_s for b in fig.bursts) / args.delay, 3),
                "turns_per_s": round(statistics.median(args.turns / b.wall_s for b in fig.bursts), 1),
                "cpu_ms_per_turn": round(statistics.median(b.cpu_s for b in fig.bursts) * 1e3 / args.turns, 3),
                "client_cpu_ms_per_turn": round(
                    statistics.median(b.client_cpu_s for b in fig.bursts) * 1e3 / args.turns, 3
                ),
                "p50_over_ideal": round(_quantile(latencies, 0.5) / args.delay, 3),
                "p99_over_ideal": round(_quantile(latencies, 0.99) / args.delay, 3),
                "turns": args.turns * len(fig.bursts),
                "failures": len(failures),
                "failure_examples": sorted(set(failures))[:5],
                "walls_s": [round(b.wall_s, 4) for b in fig.bursts],
            }
        )
    first = {r["scenario"]: r for r in rows if r["variant"] == labels[0]}
    for row in rows:
        base = first[row["scenario"]]
        row["wall_ratio_to_first"] = round(row["wall_over_ideal"] / base["wall_over_ideal"], 3)
        row["cpu_ratio_to_first"] = (
            round(row["cpu_ms_per_turn"] / base["cpu_ms_per_turn"], 3) if base["cpu_ms_per_turn"] else None
        )
    return {
        "measure": (
            f"a burst of {args.turns} concurrent one-call run_turn over Streamable HTTP, model delay {args.delay} s"
        ),
        "turns": args.turns,
        "delay_s": args.delay,
        "rounds": args.rounds,
        "warmup": args.warmup,
        "auth": args.auth,
        "progress": not args.no_progress,
        "variants": labels,
        "rows": rows,
    }


def render(r: dict[str, Any]) -> str:
    lines = [
        r["measure"],
        f"rounds: {r['rounds']} (+{r['warmup']} warm-up), variants in rotating order: {', '.join(r['variants'])}",
        f"auth: {'bearer token' if r['auth'] else 'none'}; progress token: {'yes' if r['progress'] else 'no'}",
    ]
    for row in r["rows"]:
        lines += [
            f"{row['scenario']}, {row['variant']}:",
            f"  wall / ideal (median): {row['wall_over_ideal']:.2f}  (walls {row['walls_s']} s)",
            f"  turns/s (median): {row['turns_per_s']:.1f}",
            f"  server CPU per turn (median): {row['cpu_ms_per_turn']:.2f} ms"
            f"  (client: {row['client_cpu_ms_per_turn']:.2f} ms)",
            f"  latency p50 / ideal: {row['p50_over_ideal']:.2f}  p99 / ideal: {row['p99_over_ideal']:.2f}",
            f"  failures: {row['failures']} of {row['turns']}"
            + (f"  e.g. {row['failure_examples']}" if row["failures"] else ""),
            f"  ratio to {r['variants'][0]}: wall {row['wall_ratio_to_first']:.2f}, CPU {row['cpu_ratio_to_first']}",
        ]
    return "\n".join([*lines, *machine_lines(r)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200, help="concurrent turns per burst (default 200)")
    parser.add_argument("--delay", type=float, default=0.2, help="the model's delay L in seconds (default 0.2)")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first (default 1)")
    parser.add_argument("--scenario", action="append", choices=SCENARIOS, help="repeatable; default modern, handshake")
    parser.add_argument("--store", metavar="URL", help="also run --replicas replicas on this PostgreSQL database")
    parser.add_argument("--replicas", type=int, default=2, help="replicas on --store (default 2)")
    parser.add_argument("--against", metavar="DIR", help="also run one SQLite replica from this source tree")
    parser.add_argument(
        "--baseline", action="store_true", help="also run the bare SDK server (baseline_http_server.py)"
    )
    parser.add_argument("--stdio", action="store_true", help="also run agent-server over stdio (one pipe, same turns)")
    parser.add_argument("--auth", action="store_true", help="bearer tokens on every server and request")
    parser.add_argument("--no-progress", action="store_true", help="send no progress token")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--pid-file", metavar="PATH", help="append each server's pid and variant here (for py-spy)")
    args = parser.parse_args(argv)
    args.scenario = args.scenario or ["modern", "handshake"]
    if args.turns < 1 or args.rounds < 1 or args.warmup < 0 or args.delay <= 0 or args.replicas < 1:
        parser.error("need --turns, --rounds, --replicas >= 1, --warmup >= 0 and --delay > 0")
    result = anyio.run(run, args)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
