"""MCP front door: the agent served over the Model Context Protocol (stdio and Streamable HTTP, both eras).

A thin mapping of the doors kit (`agent_server.doors`) and the runtime to the MCP SDK's low-level server:

- serving: `run.py` (stdio behind `doors.stdio`, Streamable HTTP), `app.py` (`create_server`: the SDK server,
  its lifespan, `tools/list` and `tools/call`, task capabilities and the `requestState` boundary).
- the tools, each registered once with its models (`tool_kit.tool`): `turn_tools.py` (`run_turn`, `turn_get`,
  `turn_wait`, `turn_cancel`, `compact`), `session_tools.py` (`session_*`, `agent_tools`); `tool_table.py`
  orders them and is the one place a call is answered; `tool_kit.py` is what every tool is made of.
- the `tools/list` answer: `listing.py` reads `tools.json`, which `schemas.py` generates with `schemas/`.
- a request's identity: `principals.py` (whom it is for), `connections.py` (which connection).
- what a turn streams: `streaming.py` (events as progress and event notifications, heartbeats).
- what a turn asks its client: `approval_channel.py` (elicitation forms), `client_model.py` (the client's model
  through sampling, or through a park), `input_requests.py` (a parked turn's requests on the 2026-07-28 wire).
- `rounds.py`: `run_turn` over multi round-trip requests (2026-07-28).
- `tasks/`: `run_turn` as an MCP task, both eras (see its `__init__`).
- HTTP: `http_app.py` (the door and its auth), `http_protocol.py` (uvicorn's bounds), `tokens.py` (verifiers).

No ACP here, and no concrete part of the runtime (`tests/test_architecture.py`); no module is part of an import
cycle.
"""
