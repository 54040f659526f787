"""Sessions' turn locks across the server processes of one state dir: a lock per session, held in the kernel.

A process running a turn (or a compaction) of a session holds that session's lock exclusively for the whole run,
so a turn of that session in another process waits for it, as turns of one session queue within a process
(PostgreSQL's advisory locks do the same for replicas). The kernel drops a lock when its holder exits, however it
exits, so a dead process never holds a session. Two ways to hold one, chosen once per platform:

- **On 64-bit Linux: one byte of one file.** `<state dir>/turn_locks/sessions.lock` is shared by every session;
  a session's lock is an open-file-description lock (`F_OFD_SETLK`) on the byte at an offset taken from a
  64-bit hash of its id (62 bits: every offset is a valid `off_t`). Each hold opens the file anew, so two holders
  conflict whether they are two processes or two stores in one (as `flock` does), and closing that descriptor
  drops the lock. No file is made per session: creating a file costs a journalled metadata update, up to about
  a millisecond of CPU on some virtual disks, on the event loop, for every new session's first turn. Two
  sessions whose offsets collide would only queue their turns behind each other (with 1,000 turns running at
  once, a chance of about one in 10**13).
- **Elsewhere: one `flock`ed file per session**, `<state dir>/turn_locks/<session id>.lock`, removed when the
  session is deleted (below).

Waiting polls a non-blocking `flock` every `POLL_S`: a lock another process holds gives the event loop
nothing to wait on, and a worker thread blocked in `flock` could not be cancelled (nor bounded by the
turn's deadline). Each attempt is a few system calls on a local file, well under a millisecond.

With a file per session, a session's file is removed when the session is deleted, by whoever can lock it then
(a turn still running keeps it; it is an empty file). A holder checks after locking that its file is still the
one at the path: if the path was removed (or replaced) meanwhile, it locks again, so two holders never hold two
files. Session ids reach the store well-formed (`agent_server.ids`: letters, digits, `_`, `-`), so they are safe
file names.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import struct
import sys
from collections.abc import Callable
from pathlib import Path

import anyio

POLL_S = 0.05
"""How often a waiting turn tries the lock again."""
SHARED_FILE = "sessions.lock"
BYTE_LOCKS = sys.platform == "linux" and struct.calcsize("P") == 8 and hasattr(fcntl, "F_OFD_SETLK")
"""Whether this platform holds the locks as bytes of one file (see the module docstring)."""
_FLOCK = "hhqqi4x"
"""Linux's 64-bit `struct flock`: l_type, l_whence, l_start, l_len, l_pid (0 for an OFD lock), padding."""


class TurnLockFiles:
    """The turn locks of one state dir (see the module docstring); `byte_locks` chooses the way (tests)."""

    def __init__(self, directory: Path, *, byte_locks: bool = BYTE_LOCKS) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._dir = directory
        self._shared = directory / SHARED_FILE if byte_locks else None
        if self._shared is not None:
            os.close(os.open(self._shared, os.O_RDWR | os.O_CREAT, 0o644))

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
        if self._shared is not None:
            return _try_byte_lock(self._shared, session_id)
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
        if self._shared is not None:
            return  # no file of its own
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


def _try_byte_lock(path: Path, session_id: str) -> int | None:
    offset = int.from_bytes(hashlib.blake2b(session_id.encode(), digest_size=8).digest(), "big") >> 2
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, offset, 1, 0))
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES):  # another open file description holds it
            return None
        raise
    except BaseException:
        os.close(fd)
        raise
    return fd
