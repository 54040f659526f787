"""SIGTERM and SIGINT end a front door's serving the same way: cancel it, and leave once it has unwound.

The serving scope is cancelled, so the door unwinds as at end of input (running turns recorded `cancelled`,
mounted servers stopped, the store closed). A reader blocked in a worker thread (a stdin that is no pipe) would
hold the process after that, so once `unwound` is set (or `SHUTDOWN_LIMIT_S` passed) the process leaves.
"""

from __future__ import annotations

import logging
import os
import signal
import threading

import anyio

logger = logging.getLogger(__name__)

SHUTDOWN_LIMIT_S = 5.0
"""After a signal, the longest the orderly shutdown may take before the process leaves anyway."""


async def cancel_on_signal(scope: anyio.CancelScope, unwound: threading.Event) -> None:
    """Until cancelled: at the first SIGTERM or SIGINT, cancel `scope` and leave once `unwound` is set."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            logger.info("received %s: shutting down", signal.Signals(signum).name)
            scope.cancel()
            threading.Thread(target=_exit_when, args=(unwound,), daemon=True).start()
            return


def _exit_when(unwound: threading.Event) -> None:
    unwound.wait(SHUTDOWN_LIMIT_S)
    logging.shutdown()
    os._exit(0)
