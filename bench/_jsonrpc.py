"""Shared helpers for the bench scripts: a raw JSON-RPC driver over a subprocess's stdio, and the house stats.

`RpcServer` spawns a server, performs the handshake (`initialize` 2025-11-25, `notifications/initialized`) and
then multiplexes requests: a reader task routes each response to the request that awaits it and each
`notifications/progress` to the callback registered for its token. No client SDK is involved, so the client
side costs the same JSON parsing for agent-server and for the baseline it is compared with.
"""

from __future__ import annotations

import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
from anyio.abc import Process, TaskGroup
from anyio.streams.buffered import BufferedByteReceiveStream

BENCH_DIR = Path(__file__).resolve().parent
PACKAGE_DIR = BENCH_DIR.parent / "agent_server"
BASELINE_SERVER = BENCH_DIR / "baseline_server.py"
PROTOCOL_VERSION = "2025-11-25"
MAX_LINE_BYTES = 64 * 1024 * 1024
TIMEOUT_S = 120.0

ProgressCallback = Callable[[dict[str, Any]], None]
NotificationCallback = Callable[[dict[str, Any]], None]


def cores() -> dict[str, int | None]:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {"cpu_count": os.cpu_count(), "usable": usable}


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def machine_lines(r: dict[str, Any]) -> list[str]:
    """The load-average and cores lines every script prints."""
    c = r["cores"]
    before = " ".join(f"{x:.2f}" for x in r["loadavg_before"])
    after = " ".join(f"{x:.2f}" for x in r["loadavg_after"])
    return [
        f"load average (1/5/15 min): before {before} after {after}",
        f"cores: {c['cpu_count']} (usable {c['usable']})",
    ]


def ensure_bytecode() -> None:
    """Compile agent_server's modules to `__pycache__` where their bytecode is missing or stale.

    An installed package has its bytecode (pip compiles at install; Python writes it at the first import), and
    the SDK and every other dependency in the venv have theirs, so a spawned server must find ours too: on a
    machine with `PYTHONDONTWRITEBYTECODE=1` in its environment Python never writes it, and each fresh process
    would compile about 100 modules from source (about 150 ms a spawn on these machines), a cost no installed
    copy pays. Up to date, this is a `stat` per module."""
    compileall.compile_dir(PACKAGE_DIR, quiet=1)


def machine() -> dict[str, Any]:
    """The run's conditions, printed with its figures; makes agent_server's bytecode present first."""
    ensure_bytecode()
    return {"loadavg_before": loadavg(), "cores": cores(), "python": sys.version.split()[0]}


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def goal_line(ratio: float, goal: float, *, at_most: bool = True) -> str:
    met = ratio <= goal if at_most else ratio >= goal
    sign = "<=" if at_most else ">="
    return f"goal: {sign} {goal:g}x: {'met' if met else 'NOT met'}"


def goal_met(ratio: float, goal: float, *, at_most: bool = True) -> bool:
    return ratio <= goal if at_most else ratio >= goal


def agent_argv(workspace: Path, state_dir: Path, script: Path, *extra: str) -> list[str]:
    """`python -m agent_server` as users run it, with a scripted model."""
    return [
        sys.executable,
        "-m",
        "agent_server",
        "--workspace",
        str(workspace),
        "--state-dir",
        str(state_dir),
        "--llm",
        f"script:{script}",
        *extra,
    ]


def baseline_argv() -> list[str]:
    return [sys.executable, str(BASELINE_SERVER)]


def write_script(path: Path, responses: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"responses": responses}), encoding="utf-8")
    return path


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


@dataclass
class _Pending:
    done: anyio.Event = field(default_factory=anyio.Event)
    message: dict[str, Any] | None = None


class RpcError(RuntimeError):
    pass


class RpcServer:
    """One server subprocess driven over raw JSON-RPC. Use `async with RpcServer.spawn(argv, cwd) as s:`."""

    def __init__(self, process: Process, errlog: IO[bytes], name: str) -> None:
        self.process = process
        self.name = name
        self._errlog = errlog
        assert process.stdin is not None and process.stdout is not None
        self._stdin = process.stdin
        self._reader = BufferedByteReceiveStream(process.stdout)
        self._next_id = 1
        self._pending: dict[int, _Pending] = {}
        self._progress: dict[int | str, ProgressCallback] = {}
        self.initialize_result: dict[str, Any] = {}
        self.on_notification: NotificationCallback | None = None
        """Gets every notification other than progress (the whole message)."""

    @property
    def pid(self) -> int:
        return self.process.pid

    @classmethod
    @asynccontextmanager
    async def spawn(
        cls,
        argv: list[str],
        cwd: Path,
        *,
        name: str = "server",
        capabilities: dict[str, Any] | None = None,
        timeout_s: float = TIMEOUT_S,
    ) -> AsyncGenerator[RpcServer]:
        """Spawn `argv`, complete the handshake (within `timeout_s`), serve requests until the block exits, then
        close stdin."""
        with tempfile.TemporaryFile() as errlog:
            process = await anyio.open_process(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, cwd=cwd
            )
            server = cls(process, errlog, name)
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(server._read_loop)
                    with anyio.fail_after(timeout_s):
                        server.initialize_result = await server.request(
                            "initialize",
                            {
                                "protocolVersion": PROTOCOL_VERSION,
                                "capabilities": capabilities or {},
                                "clientInfo": {"name": "bench", "version": "0"},
                            },
                        )
                        await server.notify("notifications/initialized")
                    yield server
                    await server._stop(tg)
            except Exception as exc:
                await server._kill()
                raise RpcError(f"{name} failed: {exc!r}\nstderr:\n{server.stderr_tail()}") from exc

    def stderr_tail(self, limit: int = 4000) -> str:
        self._errlog.seek(0)
        return self._errlog.read().decode(errors="replace")[-limit:]

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self._stdin.send(_line(message))

    async def request(
        self, method: str, params: dict[str, Any] | None = None, *, on_progress: ProgressCallback | None = None
    ) -> dict[str, Any]:
        """Send a request and wait for its result; `on_progress` gets each progress notification's params."""
        request_id = self._next_id
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        params = dict(params or {})
        if on_progress is not None:
            params["_meta"] = {**params.get("_meta", {}), "progressToken": request_id}
            self._progress[request_id] = on_progress
        if params:
            message["params"] = params
        pending = self._pending[request_id] = _Pending()
        try:
            await self._stdin.send(_line(message))
            await pending.done.wait()
        finally:
            self._pending.pop(request_id, None)
            self._progress.pop(request_id, None)
        assert pending.message is not None
        if "error" in pending.message:
            raise RpcError(f"{method} failed: {pending.message['error']}")
        return pending.message["result"]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, on_progress: ProgressCallback | None = None
    ) -> dict[str, Any]:
        """`tools/call`; an `isError` result raises (a bench must not time a failure)."""
        result = await self.request("tools/call", {"name": name, "arguments": arguments}, on_progress=on_progress)
        if result.get("isError"):
            raise RpcError(f"tool {name} returned an error: {result.get('content')}")
        return result

    async def _read_loop(self) -> None:
        while True:
            try:
                raw = await self._reader.receive_until(b"\n", MAX_LINE_BYTES)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError):
                for pending in self._pending.values():
                    pending.message = {"error": f"{self.name} closed its stdout"}
                    pending.done.set()
                return
            if not raw.strip():
                continue
            message = json.loads(raw)
            if "id" in message and ("result" in message or "error" in message):
                pending = self._pending.get(message["id"])
                if pending is not None:
                    pending.message = message
                    pending.done.set()
            elif message.get("method") == "notifications/progress":
                params = message.get("params", {})
                callback = self._progress.get(params.get("progressToken"))
                if callback is not None:
                    callback(params)
            elif "method" in message and "id" not in message and self.on_notification is not None:
                self.on_notification(message)

    async def _stop(self, tg: TaskGroup) -> None:
        with anyio.CancelScope(shield=True):
            await self._stdin.aclose()
            with anyio.move_on_after(10):
                await self.process.wait()
                tg.cancel_scope.cancel()
                return
            await self._kill()
            tg.cancel_scope.cancel()

    async def _kill(self) -> None:
        with anyio.CancelScope(shield=True):
            if self.process.returncode is None:
                self.process.kill()
                await self.process.wait()


def vm_rss_kib(pid: int) -> int:
    """VmRSS of a live process, in KiB, from /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS in /proc/{pid}/status")
