"""The built-in `run_command` tool: one shell command in the workspace, bounded in time and output.

The command runs as `/bin/sh -c COMMAND` in the workspace root or a `cwd` inside it (resolved as the
other tools' paths are), with stdin from /dev/null and the minimal environment of
`agent_server.child_process` (no API keys or other secrets of the agent server), in the sandbox that
`tools.sandbox` chooses (`sandbox.py`: bubblewrap, or none with a supervisor). Nothing it starts outlives
the call: when the shell exits, when the time limit passes, and when the call is cancelled (the turn was
cancelled or timed out), what is left gets SIGTERM and, a short grace later, SIGKILL, including processes
that made their own process group or session (under bwrap the PID namespace ends with the shell; without
it the supervisor, a subreaper, ends every descendant). Where neither can be had (not Linux), the command's
process group ends, and a process that starts its own session escapes, as POSIX allows.

stdout and stderr are read in chunks as they come and each keeps at most `output_max_bytes`: its
first and last halves, with a note saying how many bytes were cut from the middle, so a command
that prints forever costs bounded memory.

A command that exits with a non-zero status is a normal result (`is_error` false) that states
`exit code N`: the model reads it as it would read a terminal. A command that was stopped (time
limit) is an error result, with the output it wrote until then. When `tools.sandbox` is `bwrap` and
bubblewrap does not work here, every command is an error result saying so, and nothing runs.
"""

import signal
import subprocess
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import ByteReceiveStream, Process
from pydantic import Field

from agent_server.child_process import minimal_environment, release_pipes, terminate_group, wait_exit
from agent_server.errors import ToolFailure
from agent_server.tools.arguments import ToolArguments, input_schema
from agent_server.tools.sandbox import CommandSandbox, Launch
from agent_server.tools.workspace import Output, WorkspacePaths
from agent_server.types import TextPart, ToolAnnotations, ToolSpec

_DRAIN_S = 0.5
"""After the group is gone, how long output still held open (by an escaped process) is read."""


class RunCommandArguments(ToolArguments):
    command: str = Field(description="The shell command, run by /bin/sh -c.")
    cwd: str | None = Field(None, description="Directory to run in, relative to the workspace root; default the root.")
    timeout_s: float | None = Field(None, gt=0, description="Time limit in seconds (at most the server's limit).")


ANNOTATIONS = ToolAnnotations(read_only=False, destructive=True, idempotent=False, open_world=True)


_SANDBOXED = (
    " It may run in a sandbox: files outside the workspace read-only, a private /tmp, no network unless "
    "the server allows it."
)


def command_spec(timeout_s: float, *, sandboxed: bool = False) -> ToolSpec:
    description = (
        "Run a shell command (/bin/sh -c) in the workspace, or in cwd inside it, and return its exit code, "
        f"stdout and stderr (each cut in the middle when long). stdin is empty. Time limit {timeout_s:g} s "
        "(timeout_s may lower it); the command and everything it started are killed then. Background "
        "processes do not outlive the command. The environment is minimal (PATH, HOME, LANG and a few more)."
    ) + (_SANDBOXED if sandboxed else "")
    return ToolSpec(
        name="run_command",
        description=description,
        input_schema=input_schema(RunCommandArguments),
        annotations=ANNOTATIONS,
        kind="execute",
    )


class CappedOutput:
    """One output stream's bytes: the first and last `max_bytes / 2` kept, the count of the rest."""

    def __init__(self, max_bytes: int) -> None:
        self._head_max = max_bytes // 2
        self._tail_max = max_bytes - self._head_max
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._head_max - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        self._tail += chunk
        if len(self._tail) > self._tail_max:
            del self._tail[: len(self._tail) - self._tail_max]

    @property
    def cut(self) -> int:
        return self.total - len(self._head) - len(self._tail)

    def text(self) -> str:
        head = self._head.decode("utf-8", errors="replace")
        tail = self._tail.decode("utf-8", errors="replace")
        if not self.cut:
            return head + tail
        return f"{head}\n[... {self.cut} bytes cut from the middle ...]\n{tail}"


class CommandRunner:
    """`run_command` over one workspace. See the module docstring."""

    def __init__(
        self,
        paths: WorkspacePaths,
        *,
        environ: Mapping[str, str],
        sandbox: CommandSandbox,
        timeout_s: float,
        output_max_bytes: int,
    ) -> None:
        self._paths = paths
        self._env = minimal_environment(environ)
        self._sandbox = sandbox
        self._timeout_s = timeout_s
        self._max_bytes = output_max_bytes
        self.spec = command_spec(timeout_s, sandboxed=sandbox.may_sandbox)

    async def run_command(self, args: RunCommandArguments) -> Output:
        if "\x00" in args.command:
            raise ToolFailure("command contains a NUL character")
        state = await self._sandbox.state()
        if state.mode == "refused":
            raise ToolFailure(f"run_command is refused: {state.reason}; nothing was run")
        prepare = self._prepare
        cwd, launch = await anyio.to_thread.run_sync(prepare, args.command, args.cwd or ".", abandon_on_cancel=True)
        limit = min(args.timeout_s or self._timeout_s, self._timeout_s)
        stdout, stderr = CappedOutput(self._max_bytes), CappedOutput(self._max_bytes)
        process = await self._spawn(launch, cwd)
        grace = self._sandbox.stop_grace_s
        try:
            exited = await self._run(process, limit, stdout, stderr)
        except BaseException:  # cancelled: the group never outlives the call
            with anyio.CancelScope(shield=True):
                await terminate_group(process, grace)
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await wait_exit(process, grace)
                for stream in (process.stdout, process.stderr):
                    if stream is not None:
                        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                            await stream.aclose()
                release_pipes(process)
        report = _report(process.returncode, stdout, stderr)
        if not exited:
            raise ToolFailure(f"run_command stopped the command after its time limit of {limit:g} s\n{report}")
        structured: dict[str, Any] = {
            "exit_code": process.returncode,
            "cwd": self._paths.rel(cwd),
            "stdout_bytes": stdout.total,
            "stderr_bytes": stderr.total,
        }
        return [TextPart(text=report)], structured

    async def _spawn(self, launch: Launch, cwd: Path) -> Process:
        # Shielded: a cancel while asyncio still connects the pipes would lose a child that already runs.
        # Spawned from the event loop's thread, which lives as long as the server: the parent-death signal
        # of bwrap and of the supervisor fires when the spawning thread ends.
        with anyio.CancelScope(shield=True):
            process = await anyio.open_process(
                launch.argv, cwd=cwd, env=launch.env, stdin=subprocess.DEVNULL, start_new_session=True
            )
        return process  # pyright: ignore[reportPossiblyUnboundVariable] - a shield swallows nothing

    def _prepare(self, command: str, raw_cwd: str) -> tuple[Path, Launch]:
        """The real directory `raw_cwd` leads to, and how to start the command (blocking: stats the disk)."""
        cwd = self._paths.resolve(raw_cwd)
        if not cwd.is_dir():
            raise ToolFailure(f"cwd {raw_cwd!r} is not a directory")
        return cwd, self._sandbox.launch(command, workspace=self._paths.root, cwd=cwd, env=self._env)

    async def _run(self, process: Process, limit: float, stdout: CappedOutput, stderr: CappedOutput) -> bool:
        """Read the output until the shell exits or `limit` passes; whether it exited by itself."""
        assert process.stdout is not None and process.stderr is not None
        ended = [anyio.Event(), anyio.Event()]
        exited = False
        async with anyio.create_task_group() as readers:
            readers.start_soon(_read, process.stdout, stdout, ended[0])
            readers.start_soon(_read, process.stderr, stderr, ended[1])
            exited = await wait_exit(process, limit)
            with anyio.CancelScope(shield=True):
                await terminate_group(process, self._sandbox.stop_grace_s)  # what is left, or all of it
            with anyio.move_on_after(_DRAIN_S):  # the output still in the pipes
                for event in ended:
                    await event.wait()
            readers.cancel_scope.cancel()
        return exited


async def _read(stream: ByteReceiveStream, sink: CappedOutput, ended: anyio.Event) -> None:
    """Feed `sink` until end of file; `ended` is set then (or when cancelled)."""
    try:
        with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            async for chunk in stream:
                sink.feed(chunk)
    finally:
        ended.set()


def _report(returncode: int | None, stdout: CappedOutput, stderr: CappedOutput) -> str:
    lines = [_status(returncode)]
    for name, output in (("stdout", stdout), ("stderr", stderr)):
        if output.total:
            lines += [f"--- {name} ---", output.text().rstrip("\n")]
    if not stdout.total and not stderr.total:
        lines.append("[no output]")
    return "\n".join(lines)


def _status(returncode: int | None) -> str:
    if returncode is None:
        return "still running when stopped"
    if returncode < 0:
        with suppress(ValueError):
            return f"killed by signal {signal.Signals(-returncode).name}"
        return f"killed by signal {-returncode}"
    return f"exit code {returncode}"
