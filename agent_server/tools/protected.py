"""Protected paths: the places of a workspace that the write tools do not change (DESIGN 3.10).

A file that governs an agent (this server's config file, its `--mcp-config` file, its state directory
and the prompt files there) or an editor or agent of the same workspace (`.mcp.json`, `.vscode/`,
`.claude/`, ...), or that runs code by itself (`.git/hooks`), would turn one approved write into
anything at all: `approvals.default: allow` for the next start, a new MCP server that runs a command.
So a write there is refused, whatever the approval policy says, with an error result for the model.

Entries (`tools.protected_paths`, and the server's own files added by the toolset):

- a name without `/` (`.git`, `.mcp.json`): a file or directory of that name at any depth, and all
  below it;
- a path with `/`, relative to the workspace (`config/agent.toml`), or absolute: that file or directory
  and all below it.

Matching ignores letter case (on a case-insensitive file system `.GIT/config` is `.git/config`), and a
path is judged twice: as written (normalised without following symlinks) and as resolved (every symlink
followed), so a symlink elsewhere in the workspace does not lead into a protected place unseen.

The user may opt in to some protected paths (`tools.protected_ask`, same forms): a write there is then
asked every time, with a warning in the question, never allowed by the policy, by an earlier
`allow_session` or by the headless policy (`agent_server.agent.approvals`), and the writer checks that
the user allowed the very call it runs (`agent_server.approvals.user_approved`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Verdict = Literal["free", "refused", "ask"]


@dataclass(frozen=True)
class _Entry:
    text: str
    """As configured, for messages."""
    parts: tuple[str, ...]
    """Casefolded components: a name (one component, any depth), or a path from the file system root."""
    anywhere: bool

    def matches(self, parts: tuple[str, ...], root: tuple[str, ...]) -> bool:
        """Whether the casefolded absolute path `parts` is this entry or below it (`root`: the workspace's)."""
        if self.anywhere:
            return self.parts[0] in parts[len(root) :]
        return parts[: len(self.parts)] == self.parts


def _entries(texts: Iterable[str], root: Path) -> list[_Entry]:
    """Each entry; a path entry both as given and resolved (its symlinks followed), case folded."""
    found: list[_Entry] = []
    for text in texts:
        stripped = text.strip().rstrip("/")
        if not stripped:
            continue
        if "/" not in stripped and stripped not in (".", ".."):
            found.append(_Entry(text, (stripped.casefold(),), anywhere=True))
            continue
        path = Path(stripped).expanduser()
        path = path if path.is_absolute() else root / path
        for form in {Path(os.path.normpath(path)), path.resolve()}:
            found.append(_Entry(text, _folded(form), anywhere=False))
    return found


def _folded(path: Path) -> tuple[str, ...]:
    return tuple(part.casefold() for part in path.parts)


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    entry: str = ""
    """The protected entry the path falls under (as configured)."""


class ProtectedPaths:
    """The protected and the opted-in paths of one workspace (see the module docstring)."""

    def __init__(self, root: Path, protected: Iterable[str], ask: Iterable[str] = ()) -> None:
        """`root`: the workspace, resolved; `protected`, `ask`: entries of the forms above."""
        self._root = _folded(root)
        self._protected = _entries(protected, root)
        self._ask = _entries(ask, root)

    def judge(self, written: Path, resolved: Path) -> Judgement:
        """The verdict on a write to the absolute path `written` (normalised, symlinks not followed) that
        leads to `resolved`: `refused`, `ask` (opted in) or `free`. Blocking: nothing (pure)."""
        forms = {_folded(written), _folded(resolved)}
        opted = next((e for e in self._ask if any(e.matches(f, self._root) for f in forms)), None)
        if opted is not None:
            return Judgement("ask", opted.text)
        hit = next((e for e in self._protected if any(e.matches(f, self._root) for f in forms)), None)
        return Judgement("free") if hit is None else Judgement("refused", hit.text)


def refusal(raw: str, entry: str) -> str:
    """What the model reads when a write to `raw` is refused as protected (under `entry`)."""
    return (
        f"{raw!r} is a protected path (under {entry!r}: configuration of this agent server, of git, or of an "
        "editor or agent), which the write tools do not change; nothing was written. Ask the user to change "
        "it themselves if it must change"
    )


def warning(raw: str, entry: str) -> str:
    """What the approval question says of a write to an opted-in protected path."""
    return (
        f"{raw!r} is a protected path (under {entry!r}): it configures this agent server, git, or an editor "
        "or agent, so a write there can change what runs next and how it is approved. It is asked every "
        "time (the policy, allow_session and the headless policy never allow it)."
    )
