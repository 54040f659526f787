"""`run_turn` as an MCP task (DESIGN 3.6), over background turns, in both protocol eras.

- `wire.py`: what `initialize`/`server/discover` advertise, and the methods' params (light: the start path).
- `routes.py`: the task methods routed to their era's handlers, which load with the first task request.
- `registry.py`: the tasks of this process, bound to principal and connection (shared across replicas when
  they have no connection), and what each is now, from its turn.
- `modern.py`: 2026-07-28 (the `io.modelcontextprotocol/tasks` extension, SEP-2663).
- `legacy.py`: the handshake era's experimental tasks (2025-11-25), as VS Code uses them.
"""
