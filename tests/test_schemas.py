"""schemas/ is generated from the models; this fails when they drift (regenerate with the command below)."""

from __future__ import annotations

from pathlib import Path

from agent_server.server.schemas import drift

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"


def test_schemas_match_the_models() -> None:
    stale = drift(SCHEMAS)
    assert not stale, f"schemas/ is out of date ({stale}); run: python -m agent_server.server.schemas"


def test_event_schema_covers_every_event_kind() -> None:
    import json

    schema = json.loads((SCHEMAS / "event.json").read_text())
    kinds = set(schema["discriminator"]["mapping"])
    expected = {"turn", "status", "prompt_trace", "token", "tool_start", "tool_running", "tool_progress", "tool_result"}
    assert kinds == expected | {"compaction", "error", "done"}
