"""ACP front door: the agent served over the Agent Client Protocol v1 (JSON-RPC over stdio) for editors.

`agent-server --protocol acp` runs `acp.stdio.serve_acp`. A thin adapter over `AgentRuntime`,
like the MCP server in `server/`, built on the official `agent-client-protocol` library:

- `agent.py`: the ACP `Agent` (initialize, sessions, prompt, cancel), one `OpenSession` per session
  this connection opened, with the session's own workspace and MCP servers (`runtime.in_workspace`).
- `updates.py`: turn events -> `session/update` (coalesced message chunks, tool calls, usage), and a
  stored history replayed as updates (`session/load`).
- `prompt_blocks.py`: prompt content blocks -> the text the model sees.
- `mcp_servers.py`: the client's `mcpServers` -> mount configurations.
- `commands.py`: the slash commands (`/compact`, `/fork`, `/sessions`, `/tools`).
- `permissions.py`: approvals asked through `session/request_permission`.
- `errors.py`: the one place exceptions and failed turns become JSON-RPC errors.

No MCP types here, and nothing from `server/`.
"""

from __future__ import annotations
