"""What one huge mounted result costs: RSS growth, state.db growth, and the next prompt's estimated tokens.

One `python -m agent_server` process over stdio (raw JSON-RPC client, scripted model) mounts
`_flood_server.py`, whose `flood(size)` returns `size` characters. A first turn without tools warms the
process up; then RSS (`VmRSS`) and the size of `state.db` (with its WAL) are read, a turn whose model calls
`fake__flood {"size": N}` runs, and both are read again. The next prompt's estimated history tokens come from
`compact {"dry_run": true, "keep_last": 0}` (`estimated_tokens_before`: the summary and every live message).
These are sizes, not timings: one run is enough.

    python bench/mounted_result_size.py [--size 20000000] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _jsonrpc import RpcServer, agent_argv, vm_rss_kib, write_script  # noqa: E402
from _mount_common import PREFIX, allow_mounted, mounted, wait_mount_ready  # noqa: E402

FLOOD_SERVER = Path(__file__).resolve().parent / "_flood_server.py"


def _db_bytes(state: Path) -> int:
    return sum(path.stat().st_size for path in state.glob("state.db*"))


async def measure(size: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        workspace, state = root / "ws", root / "state"
        workspace.mkdir()
        config = root / "mcp.json"
        servers = {PREFIX: {"command": sys.executable, "args": [str(FLOOD_SERVER)]}}
        config.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
        script = write_script(
            root / "script.json",
            [
                {"content": "warm"},
                {"tool_calls": [{"name": mounted("flood"), "arguments": {"size": size}}]},
                {"content": "done"},
            ],
        )
        argv = agent_argv(workspace, state, script, "--mcp-config", str(config), *allow_mounted(root / "settings.json"))
        async with RpcServer.spawn(argv, root, name="agent-server") as agent:
            await wait_mount_ready(agent)
            await agent.call_tool("run_turn", {"prompt": "warm up"})
            rss_before, db_before = vm_rss_kib(agent.pid), _db_bytes(state)
            await agent.call_tool("run_turn", {"prompt": "call flood"})
            rss_after, db_after = vm_rss_kib(agent.pid), _db_bytes(state)
            preview = await agent.call_tool("compact", {"dry_run": True, "keep_last": 0})
    return {
        "size": size,
        "rss_growth_mib": (rss_after - rss_before) / 1024,
        "state_db_growth_mb": (db_after - db_before) / 1e6,
        "next_prompt_estimated_tokens": preview["structuredContent"]["estimated_tokens_before"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=20_000_000, help="characters the mounted tool returns")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    r = anyio.run(measure, args.size)
    if args.json:
        print(json.dumps(r))
        return
    print(f"mounted result of {r['size']} characters, one turn")
    print(f"RSS growth: {r['rss_growth_mib']:.1f} MiB")
    print(f"state.db growth: {r['state_db_growth_mb']:.2f} MB")
    print(f"next prompt's estimated history tokens: {r['next_prompt_estimated_tokens']}")


if __name__ == "__main__":
    main()
