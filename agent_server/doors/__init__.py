"""What every front door shares: the protocol-neutral part of serving the runtime, written once.

A door (`server/` for MCP, `acp/` for ACP, a program's own) is a thin mapping from this kit to its protocol:

- `stream.py`: a turn's events as a door sends them: model text coalesced by one rule, the turn's id, and the
  tool calls a turn left open; the door gives the thin mapping (`Shows`) from an event to its message.
- `show.py`: what a client is shown of a turn (`Shown`: text said, a call announced, running, ended, the
  usage), and an event as one line (MCP progress messages, task status lines).
- `transcript.py`: a stored session as the same `Shown` items (summary, messages, calls and how they ended,
  slash-command turns in their place), so a replay is drawn as the turn was live.
- `records.py`: a turn record as results carry it, summary or full, from one field list (`TurnView`).
- `errors.py`: which exceptions the caller caused (not found, invalid) and which are internal, with one logging
  rule; each door maps the kind to its protocol.
- `stdio.py`: the stdio guard (the wire off fds 0 and 1 while serving), bounded lines in, whole messages out,
  on the event loop.
- `signals.py`: SIGTERM/SIGINT cancel the serving and the process leaves once it has unwound.

The version every door reports is `agent_server.version`. The kit imports the runtime and the leaves, never a
door or a protocol library.
"""
