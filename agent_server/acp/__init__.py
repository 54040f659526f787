"""ACP front door: the agent served over the Agent Client Protocol v1 (JSON-RPC over stdio) for editors.

`agent-server --protocol acp` runs `acp.stdio.serve_acp`. A thin mapping of the doors kit (`agent_server.doors`)
and `AgentRuntime` to ACP, like the MCP server in `server/`, built on the official `agent-client-protocol` library:

- `stdio.py`: serving over `doors.stdio` until end of input or a signal (`doors.signals`).
- `wire.py`: `NdjsonWire`, the library's transport: a line that is no message is answered, not fatal.
- `agent.py`: the ACP `Agent` (initialize, sessions, prompt, cancel), one `OpenSession` per session
  this connection opened, with the session's own workspace and MCP servers (`runtime.in_workspace`).
- `updates.py`: what `doors.show` shows, as `session/update`: live turns (through `doors.stream`) and
  replays of `doors.transcript` (`session/load`) through one mapping; usage.
- `prompt_blocks.py`: prompt content blocks -> the text the model sees.
- `mcp_servers.py`: the client's `mcpServers` -> mount configurations.
- `commands.py`: the slash commands (`/compact`, `/fork`, `/sessions`, `/tools`).
- `permissions.py`: approvals asked through `session/request_permission`.
- `errors.py`: `doors.errors`' kinds as JSON-RPC codes, and a failed turn's error (`doors.records` summary).

No MCP types here, and nothing from `server/`.
"""

from __future__ import annotations
