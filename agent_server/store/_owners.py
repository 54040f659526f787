"""Which server processes are alive: one exclusively `flock`ed file per open SqliteStore.

A store holds `<state dir>/owners/<instance id>.lock` locked for its lifetime and tags the turns it
begins with its instance id. The kernel drops the lock when the process exits, however it exits,
so a lock another process can take belongs to an owner that is gone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Generator
from pathlib import Path

from agent_server.types import new_id

_OWNER_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SUFFIX = ".lock"


class OwnerLock:
    """This store instance's liveness lock. The file appears in `owners/` already locked."""

    def __init__(self, owners_dir: Path) -> None:
        owners_dir.mkdir(parents=True, exist_ok=True)
        self.instance_id = new_id("own")
        self.path = owners_dir / f"{self.instance_id}{_SUFFIX}"
        tmp = owners_dir / f"{self.instance_id}.tmp"
        self._fd: int | None = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # Renaming a locked file means no other process can ever see it unlocked while we live.
            os.replace(tmp, self.path)
        except BaseException:
            os.close(self._fd)
            tmp.unlink(missing_ok=True)
            raise

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        os.close(self._fd)
        self._fd = None


def known_owners(owners_dir: Path) -> set[str]:
    """The instance ids that have a lock file in `owners_dir`."""
    return {path.name.removesuffix(_SUFFIX) for path in owners_dir.glob(f"*{_SUFFIX}")}


@contextlib.contextmanager
def dead_owner(owners_dir: Path, owner: str) -> Generator[bool]:
    """Yield True when `owner`'s process is gone, holding its lock so it cannot come back meanwhile.

    On leaving, a dead owner's lock file is removed.
    """
    if not _OWNER_ID.match(owner):
        yield True
        return
    path = owners_dir / f"{owner}{_SUFFIX}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    finally:
        os.close(fd)
