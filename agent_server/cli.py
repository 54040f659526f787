"""Command line: flags and config file -> Settings; logging to stderr; serve MCP (or ACP) over stdio.

stdout is the protocol wire: nothing in this process writes to it except the MCP (or ACP) transport.
Heavy imports happen after argument parsing so that `--help` and errors are instant.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from agent_server.collector import pause_for_start, resume_after_start
from agent_server.errors import ConfigError, StoreError
from agent_server.version import version

if TYPE_CHECKING:
    import socket

    from agent_server.settings import Settings

EXIT_CONFIG = 2
GIL_SWITCH_INTERVAL_S = 0.001
"""How long a thread holding the GIL runs before another (the event loop's) may take it; CPython's default is 5 ms.

The server's worker threads run the store's larger transactions, the built-in tools and the walk of a huge tool-call
argument. With the default, a thread busy with a model's 1 MiB argument made the event loop wait up to 5 ms at every
hand-over, several a loop iteration, and every other session's lag reached p99 108 ms (`bench/loop_lag.py`); with
1 ms, 13 ms. A whole turn and a 200-turn burst cost the same within noise (bench/README.md, "The loop's lag on a
quiet machine, and the GIL's hand-over").
Set for the server's own process only: an embedder of `AgentRuntime` owns its process and chooses."""


LOG_LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-server",
        description="An agent runtime served over the Model Context Protocol (JSON-RPC over stdio).",
    )
    parser.add_argument("--version", action=_PrintVersion, nargs=0, help="print the version and exit")
    parser.add_argument(
        "--protocol",
        choices=["mcp", "acp"],
        default="mcp",
        help="mcp (default), or acp: the Agent Client Protocol for editors (stdio only)",
    )
    parser.add_argument("--workspace", type=Path, help="workspace root for the agent's tools (default: cwd)")
    parser.add_argument("--state-dir", type=Path, help="where sessions are stored (default: WORKSPACE/.agent_server)")
    parser.add_argument(
        "--store",
        metavar="URL",
        help="sessions in PostgreSQL (postgresql://user:password@host/db), shared by replicas; default: "
        "SQLite in the state dir (or $AGENT_SERVER_STORE)",
    )
    parser.add_argument("--config", type=Path, help="config file (JSON or TOML)")
    parser.add_argument(
        "--llm", help="model provider: openai:MODEL, openai-responses:MODEL, anthropic:MODEL, sampling or script:PATH"
    )
    parser.add_argument("--mcp-config", type=Path, help="MCP servers to mount (Claude Desktop/Cursor/VS Code JSON)")
    parser.add_argument(
        "--allow-write", action="store_true", default=None, help="offer the write_file and edit_file tools"
    )
    parser.add_argument("--allow-exec", action="store_true", default=None, help="offer the run_command tool")
    parser.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, help="stderr log level (any case)")
    parser.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio", help="default: stdio")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="HTTP port (default: 8000)")
    return parser


def build_view_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-server view",
        description="Serve the web view: sessions, turn timelines, live turns, and approvals answered in the page"
        " (approvals.web). Reads the store the servers write: the state dir of a workspace, or PostgreSQL.",
    )
    parser.add_argument("--workspace", type=Path, help="the workspace whose state dir to read (default: cwd)")
    parser.add_argument("--state-dir", type=Path, help="the state dir to read (default: WORKSPACE/.agent_server)")
    parser.add_argument("--store", metavar="URL", help="a PostgreSQL store (postgresql://...) instead of the state dir")
    parser.add_argument("--config", type=Path, help="config file (JSON or TOML): auth, http, view, request_state_keys")
    parser.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, help="stderr log level (any case)")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default: 127.0.0.1; others need auth)")
    parser.add_argument("--port", type=int, default=8765, help="port (default: 8765; 0: any free port)")
    return parser


class _PrintVersion(argparse.Action):
    """`--version`, looked up only when asked for (the package metadata is read from disk)."""

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kwargs: object) -> None:
        parser.exit(message=f"{parser.prog} {version()}\n")


def main(argv: list[str] | None = None) -> int:
    pause_for_start()  # until the runtime is entered; `finally`: whatever way the command ends before that
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    finally:
        resume_after_start()


def _main(argv: list[str]) -> int:
    if argv[:1] == ["view"]:
        return _view_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.protocol == "acp" and args.transport != "stdio":
        parser.error("--protocol acp serves stdio only (drop --transport)")
    try:
        settings = settings_from_args(args)
    except ConfigError as exc:
        sys.stderr.write(f"agent-server: {exc.message}\n")
        return EXIT_CONFIG
    logging.basicConfig(
        level=settings.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return _serve(settings, args)


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The config file with the flags over it (a flag not given leaves the file's value).

    Raises:
        ConfigError: a value is invalid.
    """
    from agent_server.settings import load_settings

    return load_settings(
        config_file=args.config,
        overrides={
            "workspace": args.workspace,
            "state_dir": args.state_dir,
            "store_url": args.store,
            "llm": args.llm,
            "log_level": args.log_level,
            "mcp_config": args.mcp_config,
            "tools": {"write": args.allow_write, "exec": args.allow_exec},
        },
    )


def _serve(settings: Settings, args: argparse.Namespace) -> int:
    import anyio

    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    try:
        if args.protocol == "acp":
            from agent_server.acp.stdio import serve_acp

            anyio.run(serve_acp, settings)
        else:
            from agent_server.server.run import serve_http, serve_stdio

            if args.transport == "stdio":
                anyio.run(serve_stdio, settings)
            else:
                anyio.run(lambda: serve_http(settings, host=args.host, port=args.port))
    except ConfigError as exc:
        sys.stderr.write(f"agent-server: {exc.message}\n")
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130
    _skip_the_final_collection()
    return 0


def _view_main(argv: list[str]) -> int:
    args = build_view_parser().parse_args(argv)
    try:
        from agent_server.settings import load_settings

        overrides = {
            "workspace": args.workspace,
            "state_dir": args.state_dir,
            "store_url": args.store,
            "log_level": args.log_level,
        }
        settings = load_settings(config_file=args.config, overrides=overrides)
    except ConfigError as exc:
        sys.stderr.write(f"agent-server: {exc.message}\n")
        return EXIT_CONFIG
    logging.basicConfig(
        level=settings.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    import anyio

    try:
        anyio.run(lambda: _serve_view(settings, host=args.host, port=args.port))
    except ConfigError as exc:
        sys.stderr.write(f"agent-server: {exc.message}\n")
        return EXIT_CONFIG
    except OSError as exc:
        sys.stderr.write(f"agent-server: cannot serve the web view on {args.host}:{args.port}: {exc.strerror}\n")
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130
    return 0


async def _serve_view(settings: Settings, *, host: str, port: int) -> None:
    """`agent-server view`: the page alone, over a runtime of its own on the store, protected as the HTTP door is
    (a non-loopback bind needs `auth`; Host/Origin checked; uvicorn with the `http` bounds). The store is opened
    first, then the port bound (`--port 0`: a free one, named in the printed link)."""
    import uvicorn

    from agent_server.runtime import AgentRuntime
    from agent_server.server.http_app import bearer_verifier, check_bind, host_header_name, transport_security
    from agent_server.server.http_protocol import bounded_protocol
    from agent_server.view.serve import page, standalone_app

    check_bind(settings, host)
    runtime = AgentRuntime(settings)
    try:
        await runtime.prepare()  # the store opens now: a bad state dir or URL is said before anything is served
    except StoreError as exc:
        raise ConfigError(exc.message) from exc
    async with runtime:  # closes the store on the way out
        with _bound(host, port) as sock:
            url = f"http://{host_header_name(host)}:{sock.getsockname()[1]}{settings.view.path}/"
            runtime.serve_view_at(url)
            verify = None if settings.auth is None else bearer_verifier(settings.auth)
            security = transport_security(host, settings.http)
            mounted = page(lambda: runtime, settings, url=url, security=security, verify=verify)
            http = settings.http
            config = uvicorn.Config(
                standalone_app(mounted),
                log_level=settings.log_level.lower(),
                lifespan="off",
                http=bounded_protocol(header_timeout_s=http.header_timeout_s, max_connections=http.max_connections),
                timeout_keep_alive=http.keep_alive_timeout_s,
                limit_concurrency=http.max_connections,
            )
            await uvicorn.Server(config).serve(sockets=[sock])


def _bound(host: str, port: int) -> socket.socket:
    """A listening-ready socket bound to `host:port` (closed again if the bind fails)."""
    import socket

    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
    except OSError:
        sock.close()
        raise
    return sock


def _skip_the_final_collection() -> None:
    """Everything is unwound (turns recorded, mounts stopped, the store closed): nothing is left to do.

    The interpreter's exit would still collect the garbage of the whole heap (the protocol libraries' models
    make it large: about 0.25 s for the ACP one, more for MCP), and hosts do not wait that long (acpx sends
    SIGTERM 100 ms after end of input). Frozen objects are left out of that collection; the process then
    exits at once, flushing and closing as usual.
    """
    import gc

    gc.freeze()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
