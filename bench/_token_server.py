"""Bench-only launcher for bench/token_stream.py: agent-server over stdio with a model that streams N deltas.

    python bench/_token_server.py --workspace W --state-dir S [--deltas 10000] [--delta "tok "] [--flush 0.05]

The model (`DeltaLLM`) answers every call by calling `on_text` `--deltas` times with the same small text, with
an event-loop checkpoint between deltas (as a provider reading a stream yields at each read), then returns the
whole text. The server is the real one, `create_server(settings, llm=...)`, served like `python -m agent_server`
serves stdio; `--flush` sets `token_flush_interval_s` (the default 0.05 is the server's own default).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import anyio
import anyio.lowlevel

from agent_server.llm.base import ModelRequest, ModelResponse, RetryCallback, TextCallback
from agent_server.settings import Settings


class DeltaLLM:
    """An `LLMClient` whose every answer streams `deltas` copies of `delta`."""

    name = "bench-deltas"

    def __init__(self, deltas: int, delta: str) -> None:
        self.deltas = deltas
        self.delta = delta

    async def complete(
        self, request: ModelRequest, *, on_text: TextCallback | None = None, on_retry: RetryCallback | None = None
    ) -> ModelResponse:
        for _ in range(self.deltas):
            await anyio.lowlevel.checkpoint()
            if on_text is not None:
                await on_text(self.delta)
        return ModelResponse(text=self.delta * self.deltas, model=request.model or self.name)


async def serve(settings: Settings, llm: DeltaLLM) -> None:
    from mcp.server.stdio import stdio_server

    from agent_server.server.app import create_server

    server = create_server(settings, llm=llm)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--deltas", type=int, default=10_000)
    parser.add_argument("--delta", default="tok ")
    parser.add_argument("--flush", type=float, default=None, help="token_flush_interval_s (default: the server's)")
    args = parser.parse_args(argv)
    overrides = {} if args.flush is None else {"token_flush_interval_s": args.flush}
    settings = Settings(workspace=args.workspace, state_dir=args.state_dir, log_level="WARNING", **overrides)
    anyio.run(serve, settings, DeltaLLM(args.deltas, args.delta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
