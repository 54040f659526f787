#!/usr/bin/env python3
"""Run one agent turn through agent-server over MCP and print the answer.

    python clients/python/run_turn.py                      # the demo: list ./ and answer (scripted model)
    python clients/python/run_turn.py "What is in src/?" --llm script:my_script.json --workspace ~/project
    python clients/python/run_turn.py "Go on" --state-dir ~/project/.agent_server --session ses_...

The server is spawned as `python -m agent_server` with the same interpreter, and spoken to only
through MCP (the SDK's `Client` over stdio). Progress shows live on stderr, one line per update;
the final answer goes to stdout. Exit code: 0 when the turn completed, 1 otherwise (its status
and error go to stderr), 2 when the server could not be reached.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, MCPError, StdioServerParameters
from mcp.types import TextContent

DEMO_SCRIPT = Path(__file__).resolve().parent.parent / "demo" / "list_workspace.json"
DEFAULT_PROMPT = "What is in this workspace?"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run one agent turn through agent-server and print the answer.")
    parser.add_argument("prompt", nargs="?", default=DEFAULT_PROMPT, help=f"what to ask (default: {DEFAULT_PROMPT!r})")
    parser.add_argument("--workspace", type=Path, default=Path.cwd(), help="workspace root (default: cwd)")
    parser.add_argument("--llm", default=f"script:{DEMO_SCRIPT}", help="model provider (default: the demo script)")
    parser.add_argument("--state-dir", type=Path, help="where sessions are stored (default: a temporary directory)")
    parser.add_argument("--session", help="session id to continue (default: the active session, or a new one)")
    parser.add_argument("--mode", choices=["auto", "legacy"], default="auto", help="MCP protocol era (default: auto)")
    parser.add_argument("--timeout", type=float, help="seconds the turn may take (run_turn's timeout_s)")
    return parser.parse_args(argv)


def server_params(args: argparse.Namespace, state_dir: Path) -> StdioServerParameters:
    server_args = ["-m", "agent_server", "--workspace", str(args.workspace.resolve())]
    server_args += ["--state-dir", str(state_dir.resolve()), "--llm", args.llm]
    # The SDK merges `env` over a minimal environment; pass ours on (a real provider needs its API key).
    return StdioServerParameters(command=sys.executable, args=server_args, env=dict(os.environ))


async def show_progress(progress: float, total: float | None, message: str | None) -> None:
    print(f"[{progress:3.0f}] {message or ''}", file=sys.stderr, flush=True)


async def run_turn(args: argparse.Namespace, state_dir: Path) -> int:
    arguments: dict[str, Any] = {"prompt": args.prompt}
    if args.session:
        arguments["session_id"] = args.session
    if args.timeout:
        arguments["timeout_s"] = args.timeout
    async with Client(server_params(args, state_dir), mode=args.mode) as client:
        result = await client.call_tool("run_turn", arguments, progress_callback=show_progress)
    text = "\n".join(part.text for part in result.content if isinstance(part, TextContent))
    record = result.structured_content or {}
    status = record.get("status")
    if status == "completed":
        print(text)
        return 0
    error = record.get("error") or {}
    print(f"turn {status or 'rejected'}: {error.get('message') or text}", file=sys.stderr)
    if record.get("session_id"):
        print(f"session {record['session_id']}, turn {record.get('turn_id')}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    code = 2
    with tempfile.TemporaryDirectory(prefix="agent-server-demo-") as tmp:
        try:
            code = anyio.run(run_turn, args, args.state_dir or Path(tmp))
        except* MCPError as group:  # start-up failures arrive wrapped in exception groups
            for exc in _leaves(group):
                print(f"MCP error {exc.code}: {exc.message}", file=sys.stderr)
        except* OSError as group:
            for exc in _leaves(group):
                print(f"cannot start agent-server: {exc}", file=sys.stderr)
    return code


def _leaves(group: BaseExceptionGroup[Any]) -> list[Any]:
    """The exceptions inside a (nested) exception group."""
    leaves: list[Any] = []
    for exc in group.exceptions:
        leaves += _leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return leaves


if __name__ == "__main__":
    sys.exit(main())
