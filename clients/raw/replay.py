#!/usr/bin/env python3
"""Replay a raw JSON-RPC transcript through an MCP stdio server and check every answer.

    python clients/raw/replay.py                                  # agent-server with clients/raw/script.json
    python clients/raw/replay.py --show-stderr -- agent-server --log-level DEBUG --llm script:/abs/script.json

The server command (everything after `--`) runs in a fresh temporary directory that holds the files
of `WORKSPACE_FILES` (agent-server's default workspace is its cwd, so that directory is the
workspace and its state lands there too); give it absolute paths. The default command is
`agent-server --llm script:<this directory>/script.json`.

Each line of the transcript (`transcript.jsonl`) is sent as it is. After a request (a line with an
`id`) the next line is sent only once that request's response has arrived. Each response is checked
against the line of `expected.jsonl` with the same `id`:

    {"id": 4, "step": "run_turn", "outcome": "result" | "error",
     "equals":   {"result.structuredContent.status": "completed"},   # dotted paths; `*` maps over a list
     "contains": {"result.tools.*.name": ["run_turn"]},               # substring, or items of a list
     "progress": {"token": "turn-1", "min_count": 5, "contains": ["sampling (round 1)"], "last": "done: completed"}}

Every line the server writes to stdout must be a JSON-RPC 2.0 message, and the server must exit
cleanly when its stdin closes. One PASS/FAIL line is printed per step; the exit code is 0 when all
pass, 1 when any fails, 2 when the server cannot be started.

The module is also a small library: the subprocess tests import `RawServer`, `parse_jsonrpc`,
`replay` and friends from it. It imports nothing from agent_server.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

HERE = Path(__file__).resolve().parent
TRANSCRIPT = HERE / "transcript.jsonl"
EXPECTED = HERE / "expected.jsonl"
SCRIPT = HERE / "script.json"
DEFAULT_COMMAND = ["agent-server", "--llm", f"script:{SCRIPT}"]
WORKSPACE_FILES = {"hello.txt": "Hello from the replay workspace.\n"}
"""Files written into the server's working directory (its workspace) before it starts."""

MAX_LINE_BYTES = 16 * 1024 * 1024
STEP_TIMEOUT_S = 15.0
EXIT_GRACE_S = 5.0

Message = dict[str, Any]


# --- JSON-RPC framing -------------------------------------------------------------------------


def parse_jsonrpc(line: str) -> tuple[Message | None, str | None]:
    """`(message, None)` when `line` is one JSON-RPC 2.0 message, else `(None, why not)`.

    Valid: a response (`id` and exactly one of `result`/`error`, an error being `{code, message}`),
    a notification (`method`, no `id`) or a request (`method` and `id`).
    """
    try:
        data: object = json.loads(line)
    except ValueError as exc:
        return None, f"not JSON ({exc})"
    if not isinstance(data, dict):
        return None, f"not a JSON object but {type(data).__name__}"
    message: Message = data
    if message.get("jsonrpc") != "2.0":
        return None, f"jsonrpc is {message.get('jsonrpc')!r}, not '2.0'"
    problem = _request_problem(message) if "method" in message else _response_problem(message)
    return (None, problem) if problem else (message, None)


def _request_problem(message: Message) -> str | None:
    if not isinstance(message["method"], str):
        return "method is not a string"
    if "params" in message and not isinstance(message["params"], dict | list):
        return "params is neither an object nor an array"
    if "result" in message or "error" in message:
        return "a request or notification with result/error"
    return None


def _response_problem(message: Message) -> str | None:
    if "id" not in message:
        return "neither a response (no id) nor a notification (no method)"
    if not isinstance(message["id"], str | int) or isinstance(message["id"], bool):
        return f"id {message['id']!r} is neither a string nor an integer"
    if ("result" in message) == ("error" in message):
        return "a response must have exactly one of result and error"
    error = message.get("error", {"code": 0, "message": ""})
    if not (isinstance(error, dict) and isinstance(error.get("code"), int) and isinstance(error.get("message"), str)):
        return "error is not an object with an integer code and a string message"
    return None


def kind_of(message: Message) -> str:
    """`request`, `notification` or `response` (of a message `parse_jsonrpc` accepted)."""
    if "method" in message:
        return "request" if "id" in message else "notification"
    return "response"


class RawServer:
    """A server process spoken to in raw JSON-RPC lines over its stdin/stdout.

    Every stdout line is kept in `lines`; those that are not JSON-RPC 2.0 also go to `invalid`
    (with the reason) and are skipped by `receive`.
    """

    def __init__(self, process: Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self.invalid: list[str] = []
        assert process.stdout is not None and process.stdin is not None
        self._stdout = BufferedByteReceiveStream(process.stdout)
        self._eof = False

    @classmethod
    @contextlib.asynccontextmanager
    async def spawn(
        cls,
        command: Sequence[str],
        *,
        cwd: Path | str | None = None,
        env: Mapping[str, str] | None = None,
        stderr: int | IO[Any] | None = None,
    ) -> AsyncIterator[RawServer]:
        """Start `command` in its own process group; on leaving, kill it if it still runs and reap it.

        Raises:
            OSError: the command cannot be started (e.g. FileNotFoundError).
        """
        process = await anyio.open_process(
            list(command), cwd=cwd, env=dict(env) if env is not None else None, stderr=stderr, start_new_session=True
        )
        server = cls(process)
        try:
            yield server
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    server.kill()
                with anyio.move_on_after(EXIT_GRACE_S):
                    await process.aclose()

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        """SIGKILL the server's whole process group (it has its own session)."""
        with contextlib.suppress(ProcessLookupError):
            if hasattr(os, "killpg"):
                os.killpg(self.process.pid, signal.SIGKILL)
            else:  # pragma: no cover - not POSIX
                self.process.kill()

    async def send(self, message: Message) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send((json.dumps(message) + "\n").encode())

    async def receive(self) -> Message:
        """The next JSON-RPC message on stdout; invalid lines are recorded and skipped.

        Raises:
            anyio.EndOfStream: stdout closed (a trailing unterminated line is recorded as invalid).
        """
        while True:
            if self._eof:
                raise anyio.EndOfStream
            try:
                raw = await self._stdout.receive_until(b"\n", MAX_LINE_BYTES)
            except (anyio.IncompleteRead, anyio.EndOfStream):
                self._eof = True
                rest = bytes(self._stdout.buffer)
                if rest.strip():
                    line = rest.decode("utf-8", errors="replace")
                    self.lines.append(line)
                    self.invalid.append(f"unterminated last line: {_short(line)}")
                raise anyio.EndOfStream from None
            line = raw.decode("utf-8", errors="replace")
            self.lines.append(line)
            message, problem = parse_jsonrpc(line)
            if message is not None:
                return message
            self.invalid.append(f"{problem}: {_short(line)}")

    async def request(self, message: Message) -> tuple[Message, list[Message]]:
        """Send a request; return its response and everything else the server sent before it."""
        await self.send(message)
        others: list[Message] = []
        while True:
            received = await self.receive()
            if kind_of(received) == "response" and received["id"] == message["id"]:
                return received, others
            others.append(received)

    async def finish(self, timeout: float = EXIT_GRACE_S) -> int | None:
        """Close stdin, read (and check) what is left on stdout, and wait for the exit.

        Returns the exit code, or None when the server did not exit within `timeout` (it is then killed).
        """
        assert self.process.stdin is not None
        await self.process.stdin.aclose()
        with anyio.move_on_after(timeout):
            with contextlib.suppress(anyio.EndOfStream):
                while True:
                    await self.receive()
            return await self.process.wait()
        self.kill()
        await self.process.wait()
        return None


# --- expectations -------------------------------------------------------------------------------

_MISSING = object()


def lookup(data: Any, path: str) -> Any:
    """The value at a dotted path; a numeric part indexes a list, `*` maps the rest over a list."""
    parts = path.split(".")
    for i, part in enumerate(parts):
        if part == "*":
            if not isinstance(data, list):
                return _MISSING
            rest = ".".join(parts[i + 1 :])
            return [lookup(item, rest) if rest else item for item in data]
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return _MISSING
    return data


def check_response(expectation: Mapping[str, Any], response: Message, others: Sequence[Message]) -> list[str]:
    """What is wrong with `response` (and the notifications that came before it), given an expectation."""
    problems: list[str] = []
    outcome = expectation.get("outcome", "result")
    if outcome not in response:
        got = "error" if "error" in response else "result"
        problems.append(f"expected a {outcome}, got {got}: {_short(json.dumps(response.get(got)))}")
        return problems
    for path, want in expectation.get("equals", {}).items():
        got = lookup(response, path)
        if got is _MISSING:
            problems.append(f"{path} is missing")
        elif got != want:
            problems.append(f"{path} is {_short(json.dumps(got))}, expected {json.dumps(want)}")
    for path, want in expectation.get("contains", {}).items():
        got = lookup(response, path)
        wanted = want if isinstance(want, list) else [want]
        if not isinstance(got, str | list):
            problems.append(f"{path} is {'missing' if got is _MISSING else type(got).__name__}, not a string or list")
            continue
        missing = [w for w in wanted if w not in got]
        if missing:
            problems.append(f"{path} lacks {json.dumps(missing)}")
    if "progress" in expectation:
        problems += check_progress(expectation["progress"], others)
    return problems


def check_progress(expectation: Mapping[str, Any], messages: Sequence[Message]) -> list[str]:
    """Progress notifications on the expected token: strictly increasing values and expected messages."""
    token = expectation["token"]
    updates = [
        m["params"]
        for m in messages
        if m.get("method") == "notifications/progress" and m.get("params", {}).get("progressToken") == token
    ]
    values = [u.get("progress") for u in updates]
    texts = [u.get("message") or "" for u in updates]
    problems: list[str] = []
    if len(updates) < expectation.get("min_count", 1):
        problems.append(f"{len(updates)} progress notification(s) on {token!r}, expected >= {expectation['min_count']}")
    if any(not isinstance(v, int | float) for v in values) or any(
        b <= a for a, b in zip(values, values[1:], strict=False)
    ):
        problems.append(f"progress values are not strictly increasing: {values}")
    missing = [t for t in expectation.get("contains", []) if t not in texts]
    if missing:
        problems.append(f"progress messages lack {json.dumps(missing)}")
    if "last" in expectation and (not texts or texts[-1] != expectation["last"]):
        problems.append(f"last progress message is {texts[-1] if texts else None!r}, expected {expectation['last']!r}")
    if any("\n" in t for t in texts):
        problems.append("a progress message spans several lines")
    return problems


# --- the replay ---------------------------------------------------------------------------------


@dataclass
class StepResult:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class Report:
    steps: list[StepResult] = field(default_factory=list[StepResult])
    lines: list[str] = field(default_factory=list[str])
    """Every line the server wrote to stdout."""
    invalid: list[str] = field(default_factory=list[str])
    """The stdout lines that are not JSON-RPC 2.0, with the reason."""
    responses: dict[Any, Message] = field(default_factory=dict[Any, Message])
    stderr: str = ""
    returncode: int | None = None

    @property
    def ok(self) -> bool:
        return all(step.ok for step in self.steps)


def load_jsonl(path: Path) -> list[Message]:
    """The JSON objects of a file, one per non-blank line."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def step_name(message: Message, expectation: Mapping[str, Any] | None) -> str:
    if expectation and "step" in expectation:
        return str(expectation["step"])
    name = message.get("method", "?")
    if name == "tools/call":
        name += f" {message.get('params', {}).get('name')}"
    return name


async def replay(
    command: Sequence[str],
    transcript: Sequence[Message],
    expectations: Sequence[Message],
    *,
    workdir: Path,
    env: Mapping[str, str] | None = None,
    step_timeout: float = STEP_TIMEOUT_S,
) -> Report:
    """Run `command` in `workdir` (after writing `WORKSPACE_FILES` there) and replay the transcript.

    Raises:
        OSError: the command cannot be started.
    """
    for name, text in WORKSPACE_FILES.items():
        (workdir / name).write_text(text, encoding="utf-8")
    by_id = {e["id"]: e for e in expectations}
    report = Report()
    with tempfile.TemporaryFile() as errlog:
        async with RawServer.spawn(command, cwd=workdir, env=env, stderr=errlog) as server:
            await _run_steps(server, transcript, by_id, report, step_timeout)
            report.returncode = await server.finish()
            report.steps.append(
                StepResult("server exits 0 on stdin EOF", report.returncode == 0, f"exit code {report.returncode}")
            )
            report.lines, report.invalid = server.lines, server.invalid
        errlog.seek(0)
        report.stderr = errlog.read().decode("utf-8", errors="replace")
    report.steps.append(
        StepResult(
            "every stdout line is JSON-RPC 2.0",
            not report.invalid,
            f"{len(report.lines)} line(s)" + "".join(f"\n      {bad}" for bad in report.invalid),
        )
    )
    sent = {m["id"] for m in transcript if "id" in m}
    for missing in sorted(set(by_id) - sent, key=str):
        name = step_name({}, by_id[missing])
        report.steps.append(StepResult(name, False, f"no request with id {missing!r} was sent"))
    return report


async def _run_steps(
    server: RawServer,
    transcript: Sequence[Message],
    by_id: Mapping[Any, Message],
    report: Report,
    step_timeout: float,
) -> None:
    for index, message in enumerate(transcript):
        expectation = by_id.get(message.get("id"))
        name = step_name(message, expectation)
        if "id" not in message:
            await server.send(message)
            report.steps.append(StepResult(name, True, "sent (notification, no response expected)"))
            continue
        try:
            with anyio.fail_after(step_timeout):
                response, others = await server.request(message)
        except (TimeoutError, anyio.EndOfStream) as exc:
            why = "the server closed stdout" if isinstance(exc, anyio.EndOfStream) else f"{step_timeout:g}s passed"
            report.steps.append(StepResult(name, False, f"no response: {why}"))
            left = len(transcript) - index - 1
            if left:
                report.steps.append(StepResult("rest of the transcript", False, f"{left} line(s) not sent"))
            return
        report.responses[message["id"]] = response
        problems = check_response(expectation, response, others) if expectation else []
        outcome = "error" if "error" in response else "result"
        detail = "; ".join(problems) if problems else f"{outcome}, {len(others)} notification(s) before it"
        report.steps.append(StepResult(name, not problems, detail))


# --- command line -------------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    argv = list(argv)
    command = DEFAULT_COMMAND
    if "--" in argv:
        cut = argv.index("--")
        argv, command = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(
        description="Replay a raw JSON-RPC transcript through an MCP stdio server and check the answers.",
        epilog=f"Everything after -- is the server command (default: {' '.join(DEFAULT_COMMAND)}).",
    )
    parser.add_argument("--transcript", type=Path, default=TRANSCRIPT, help="JSON-RPC lines to send")
    parser.add_argument("--expected", type=Path, default=EXPECTED, help="expectations, one per request id")
    parser.add_argument("--timeout", type=float, default=STEP_TIMEOUT_S, help="seconds to wait for each response")
    parser.add_argument("--show-stderr", action="store_true", help="print the server's stderr at the end")
    args = parser.parse_args(argv)
    if not command:
        parser.error("no server command after --")
    return args, command


def main(argv: Sequence[str] | None = None) -> int:
    args, command = parse_args(sys.argv[1:] if argv is None else argv)
    transcript, expectations = load_jsonl(args.transcript), load_jsonl(args.expected)
    with tempfile.TemporaryDirectory(prefix="replay-") as workdir:

        async def run() -> Report:
            return await replay(command, transcript, expectations, workdir=Path(workdir), step_timeout=args.timeout)

        try:
            report = anyio.run(run)
        except OSError as exc:
            print(f"cannot start {' '.join(command)}: {exc}", file=sys.stderr)
            return 2
    for step in report.steps:
        print(f"{'PASS' if step.ok else 'FAIL'}  {step.name}: {step.detail}")
    failed = sum(not step.ok for step in report.steps)
    print(f"{len(report.steps) - failed} passed, {failed} failed")
    if report.stderr and (args.show_stderr or failed):
        print(f"--- server stderr ({len(report.stderr.splitlines())} lines) ---", file=sys.stderr)
        print(report.stderr if args.show_stderr else _tail(report.stderr), file=sys.stderr, end="")
    return 1 if failed else 0


def _short(text: str, limit: int = 200) -> str:
    text = text.rstrip("\n")
    return text if len(text) <= limit else text[:limit] + "..."


def _tail(text: str, lines: int = 20) -> str:
    return "".join(text.splitlines(keepends=True)[-lines:])


if __name__ == "__main__":
    sys.exit(main())
