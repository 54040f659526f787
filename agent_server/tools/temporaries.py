"""The write tools' temporary files: named so they are recognised, removed once their writer is gone.

A write goes to a temporary file next to its target, which then replaces the target in one rename
(`writes._atomic_write`); a failed write removes its temporary file. A process killed in the middle
(SIGKILL, a crash, power loss) cannot, so the name says whose it is: `.<name>.<pid>-<8 hex>.agent-server.tmp`
(hidden, with the writing process's id). Before a write tool writes in a directory, it removes the
temporary files there that are older than `STALE_AFTER_S` (10 minutes) and whose process no longer runs
on this machine (or is this very process, started after the file was last written: a reused pid). The
age also protects a writer on another machine sharing the directory, whose pid means nothing here: no
write takes that long. A process looks at each directory at most once per `STALE_AFTER_S`.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)

SUFFIX = ".agent-server.tmp"
STALE_AFTER_S = 600.0
_PATTERN = re.compile(r"\..+\.(\d{1,10})-[0-9a-f]{8}" + re.escape(SUFFIX))
_LOOKED_MAX = 4096
"""Directories remembered as looked at; past that the memory starts again (bounded, never wrong)."""
_STARTED = time.time()
"""About when this process started: a temporary file of its own pid last written before is not its own."""


def temporary_name(name: str) -> str:
    """A fresh temporary file name for writing `name` (see the module docstring); at most 190 bytes."""
    head = name.encode("utf-8", "surrogateescape")[:150].decode("utf-8", "ignore")
    return f".{head}.{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}"


class StaleTemporaries:
    """Removes stale temporary files (see the module docstring). Thread-safe: writes run in worker threads."""

    def __init__(self, *, stale_after_s: float = STALE_AFTER_S, clock: Callable[[], float] = time.time) -> None:
        self._stale_after_s = stale_after_s
        self._clock = clock
        self._looked: dict[tuple[int, int], float] = {}
        self._lock = threading.Lock()

    def clean(self, directory: int) -> int:
        """Remove the stale temporary files in the directory open as `directory`; how many. Never raises
        for the file system: a file that cannot be removed is left (and logged)."""
        now = self._clock()
        if not self._due(directory, now):
            return 0
        try:
            with os.scandir(directory) as entries:
                names = [entry.name for entry in entries if entry.name.endswith(SUFFIX)]
        except OSError:
            return 0
        return sum(self._remove_if_stale(directory, name, now) for name in names)

    def _due(self, directory: int, now: float) -> bool:
        try:
            found = os.fstat(directory)
        except OSError:
            return False
        key = (found.st_dev, found.st_ino)
        with self._lock:
            last = self._looked.get(key)
            if last is not None and now - last < self._stale_after_s:
                return False
            if len(self._looked) >= _LOOKED_MAX:
                self._looked.clear()
            self._looked[key] = now
        return True

    def _remove_if_stale(self, directory: int, name: str, now: float) -> bool:
        matched = _PATTERN.fullmatch(name)
        if matched is None:
            return False
        try:
            found = os.stat(name, dir_fd=directory, follow_symlinks=False)
            if not stat.S_ISREG(found.st_mode) or now - found.st_mtime < self._stale_after_s:
                return False
            if not _writer_gone(int(matched.group(1)), found.st_mtime):
                return False
            os.unlink(name, dir_fd=directory)
        except OSError as exc:
            logger.debug("could not remove the stale temporary file %r: %s", name, exc)
            return False
        logger.info("removed the stale temporary file %r of a write that did not finish", name)
        return True


def _writer_gone(pid: int, modified: float) -> bool:
    if pid == os.getpid():
        return modified < _STARTED
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # none runs (no process has an id too large for the OS)
        return True
    except PermissionError:  # another user's process runs
        return False
    return False
