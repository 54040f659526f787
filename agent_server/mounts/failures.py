"""One readable line saying why a mounted server is down, out of whatever its transport raised.

`mcp.Client` reports startup failures as nested `ExceptionGroup`s and a dying HTTP transport as an
`ExceptionGroup` of `httpx2` errors; the line names the most telling leaf, and for a stdio server
its exit status and the last lines it wrote to stderr. The line is redacted (the server's secrets,
credentials in URLs) before it is cut, so no part of a secret survives.
"""

from __future__ import annotations

import anyio
import httpx2
import mcp_types as types
from mcp import MCPError

from agent_server.mounts.config import MountConfig
from agent_server.mounts.stdio import StdioProcess
from agent_server.redaction import redact

_MAX_LENGTH = 1000


def describe_failure(exc: BaseException | None, config: MountConfig, stdio: StdioProcess | None) -> str:
    leaf = _most_telling(_leaves(exc)) if exc is not None else None
    if isinstance(leaf, TimeoutError):
        text = str(leaf)
    elif _is_spawn_error(leaf) and config.command is not None:
        assert isinstance(leaf, OSError)
        text = f"cannot start {config.command!r}: {leaf.strerror or leaf}"
        if leaf.filename is not None and str(leaf.filename) != config.command:
            text += f" ({leaf.filename})"
    elif leaf is None or (isinstance(leaf, MCPError) and leaf.code == types.CONNECTION_CLOSED):
        text = _exited(stdio) if stdio is not None else f"the connection to {config.url or 'the server'} closed"
    elif isinstance(leaf, httpx2.HTTPError):
        text = f"{config.url}: {type(leaf).__name__}: {leaf}"
    else:
        text = f"{type(leaf).__name__}: {leaf}"
    tail = stdio.stderr_tail() if stdio is not None else ""
    if tail:
        text += f"; stderr: {tail}"
    text = redact(text, config.secrets)
    return text if len(text) <= _MAX_LENGTH else text[: _MAX_LENGTH - 3] + "..."


def _is_spawn_error(leaf: BaseException | None) -> bool:
    return isinstance(leaf, OSError) and not isinstance(leaf, TimeoutError)


def _exited(stdio: StdioProcess) -> str:
    if stdio.failure is not None:
        return stdio.failure
    code = stdio.returncode
    if code is None:
        return "the server closed its stdout"
    if code < 0:
        return f"the server process was killed by signal {-code}"
    return f"the server process exited with status {code}"


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]  # pyright: ignore[reportUnknownVariableType, reportUnknownMemberType, reportUnknownArgumentType]
    return [exc]


def _most_telling(leaves: list[BaseException]) -> BaseException | None:
    """An OS error (spawning the command) over a timeout over anything else, cancellations last."""
    cancelled = anyio.get_cancelled_exc_class()
    ranked = sorted(
        (leaf for leaf in leaves if not isinstance(leaf, cancelled)),
        key=lambda leaf: (
            not _is_spawn_error(leaf),
            not isinstance(leaf, TimeoutError),
            isinstance(leaf, MCPError),
        ),
    )
    return ranked[0] if ranked else None
