"""The cyclic garbage collector paused while code loads: the command line's start, and the turn code's import.

Starting imports the protocol libraries and builds their models: hundreds of thousands of objects that live as
long as the process, and almost none of them garbage. The cyclic collector walks them again and again as they
pile up (its collections took 55 ms of a 700 ms start here, `bench/first_turn.py`). So `agent-server` pauses it
from its first line (`pause_for_start`) until the front door is up and its runtime entered (`resume_after_start`,
also on every way out of the command line), which first moves everything made so far into the permanent
generation (`gc.freeze`), so that no later collection walks it again. The start's few cycles of garbage stay,
once: a bounded cost. `paused` does the same for one import (the turn code's, `AgentRuntime.prepare`).

Only a pause made here is resumed here: a program that embeds the runtime and turned its collector off keeps it
off.
"""

from __future__ import annotations

import gc
from collections.abc import Generator
from contextlib import contextmanager

_paused = False


def pause_for_start() -> None:
    """Pause the collector (if it runs) until `resume_after_start`."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume_after_start() -> None:
    """Freeze what the start made and let the collector run again, if `pause_for_start` paused it. Idempotent."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()


@contextmanager
def paused() -> Generator[None]:
    """The collector paused (if it runs) for a bounded burst of long-lived allocation: importing modules."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
