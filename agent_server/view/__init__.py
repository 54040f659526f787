"""The web view: a local page of sessions, turn timelines, live turns, and approvals answered in the page.

`agent-server view` serves it on its own (`agent_server.view.serve`); the Streamable HTTP transport serves it
beside `/mcp` with `view.enabled` (`agent_server.view.app.view_app`). Nothing here is imported on the stdio path
but `settings` (which the settings need).
"""
