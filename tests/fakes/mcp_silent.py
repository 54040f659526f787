"""A fake MCP server that never answers anything (stdlib only, so it starts in milliseconds).

`python tests/fakes/mcp_silent.py PID_FILE [--ignore-stdin] [--ignore-sigterm] [--child PID_FILE2]`:
writes its pid, then reads stdin and discards it (exiting at EOF), or with `--ignore-stdin` never reads
it and never exits by itself; `--ignore-sigterm` also ignores SIGTERM (only SIGKILL ends it);
`--child` first starts a grandchild (`sleep`-like, same process group) and writes its pid too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> None:
    Path(argv[0]).write_text(str(os.getpid()))
    if "--ignore-sigterm" in argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "--child" in argv:
        target = argv[argv.index("--child") + 1]
        code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"
        child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        Path(target).write_text(str(child.pid))
    print("silent server up; it will never answer", file=sys.stderr, flush=True)
    if "--ignore-stdin" in argv:
        while True:
            time.sleep(3600)
    while sys.stdin.buffer.read(4096):
        pass


if __name__ == "__main__":
    main(sys.argv[1:])
