"""What every front door shares: the protocol-neutral part of serving the runtime, written once.

A door (`server/` for MCP, `acp/` for ACP, a program's own) is a thin mapping from this kit to its protocol:

- `records.py`: a turn record as results carry it, summary or full, from one field list (`TurnView`).
- `errors.py`: which exceptions the caller caused (not found, invalid) and which are internal, with one logging
  rule; each door maps the kind to its protocol.
- `signals.py`: SIGTERM/SIGINT cancel the serving and the process leaves once it has unwound.

The version every door reports is `agent_server.version`. The kit imports the runtime and the leaves, never a
door or a protocol library.
"""
