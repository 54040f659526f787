"""A raw stdio MCP client in a process of its own, for tests that kill a client mid-turn.

    python stdio_client.py STDERR_FILE -- SERVER_ARGV...

It spawns the server (its stderr to STDERR_FILE), starts a `run_turn` with a progress token, and once the turn
sends its first progress notification prints the server's pid on its own stdout and waits, reading nothing more,
until it is killed: the server's stdin and stdout then close as they do when a real client dies.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

HELLO = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "doomed", "version": "0"}}
CALL = {"name": "run_turn", "arguments": {"prompt": "slow"}, "_meta": {"progressToken": 1}}
LINES = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": CALL},
]


def main() -> None:
    stderr_path, separator, *argv = sys.argv[1:]
    assert separator == "--"
    with open(stderr_path, "wb") as stderr:
        server = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(b"".join(json.dumps(line).encode() + b"\n" for line in LINES))
    server.stdin.flush()
    for line in server.stdout:
        if b'"notifications/progress"' in line and b"sampling" in line:
            break
    print(server.pid, flush=True)
    while True:  # until killed; the server's pipes close with this process
        time.sleep(60)


if __name__ == "__main__":
    main()
