"""Sessions' turn locks across the server processes of one state dir: one `flock`ed file per session.

A process running a turn (or a compaction) of a session holds `<state dir>/turn_locks/<session id>.lock`
exclusively for the whole run, so a turn of that session in another process waits for it, as turns of one
session queue within a process (PostgreSQL's advisory locks do the same for replicas). The kernel drops a
lock when its holder exits, however it exits, so a dead process never holds a session.

Waiting polls a non-blocking `flock` every `POLL_S`: a lock another process holds gives the event loop
nothing to wait on, and a worker thread blocked in `flock` could not be cancelled (nor bounded by the
turn's deadline). Each attempt is a few system calls on a local file, well under a millisecond.

A session's file is removed when the session is deleted, by whoever can lock it then (a turn still running
keeps it; it is an empty file). A holder checks after locking that its file is still the one at the path:
if the path was removed (or replaced) meanwhile, it locks again, so two holders never hold two files.
Session ids reach the store well-formed (`agent_server.ids`: letters, digits, `_`, `-`), so they are safe
file names.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable
from pathlib import Path

import anyio

POLL_S = 0.05
"""How often a waiting turn tries the lock again."""


class TurnLockFiles:
    """The turn lock files of one state dir (see the module docstring)."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._dir = directory

    async def acquire(self, session_id: str, on_busy: Callable[[], None] | None = None) -> int:
        """The session's lock (an open file descriptor, for `release`), once no other holder has it; `on_busy`
        is told when it has to wait. Cancellable (the caller's deadline) while waiting."""
        told = False
        while (fd := self.try_lock(session_id)) is None:
            if on_busy is not None and not told:
                told = True
                on_busy()
            await anyio.sleep(POLL_S)
        return fd

    def try_lock(self, session_id: str) -> int | None:
        """The session's lock if it is free now, else None."""
        path = self._path(session_id)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        if not _still_at(fd, path):  # removed by a session delete after we opened it: lock the new one
            os.close(fd)
            return self.try_lock(session_id)
        return fd

    def release(self, fd: int) -> None:
        os.close(fd)  # closing the only descriptor of the open file drops its flock

    def remove(self, session_id: str) -> None:
        """Remove a deleted session's file, unless a turn holds it now (it stays then, empty)."""
        fd = self.try_lock(session_id)
        if fd is None:
            return
        try:
            with contextlib.suppress(FileNotFoundError):
                self._path(session_id).unlink()
        finally:
            self.release(fd)

    def _path(self, session_id: str) -> Path:
        return self._dir / f"{session_id}.lock"


def _still_at(fd: int, path: Path) -> bool:
    try:
        here = os.stat(path)
    except FileNotFoundError:
        return False
    there = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)
