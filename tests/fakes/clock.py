"""A stand-in for the `time` module whose monotonic clock reads like a machine up for a given time."""

from __future__ import annotations

import time
from types import SimpleNamespace


def booted_clock(uptime_s: float) -> SimpleNamespace:
    """`time.monotonic` starting at `uptime_s` and advancing with the real clock (for `monkeypatch.setattr`).

    Patch a module's `time` name with it, never the `time` module itself: the event loop reads the real clock.
    """
    start = time.monotonic()
    return SimpleNamespace(monotonic=lambda: uptime_s + (time.monotonic() - start))
