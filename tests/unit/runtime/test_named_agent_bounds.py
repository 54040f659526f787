"""What callers send cannot grow the runtime's named-agent state without bound: catalogs of the workspaces ACP
sessions name, and the validators of the output schemas callers send."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_server import output_schema
from agent_server.runtime.agents import CATALOGS_KEPT, NamedAgents
from agent_server.settings import AgentSettings, Settings

pytestmark = [pytest.mark.anyio]


async def test_the_catalogs_of_many_workspaces_are_bounded(tmp_path: Path) -> None:
    agents = NamedAgents(Settings(workspace=tmp_path, agents={"a": AgentSettings(description="d")}), {})
    for index in range(CATALOGS_KEPT + 5):
        catalog = await agents.catalog(tmp_path / f"ws{index}")
        assert set(catalog.agents) == {"a"}
    assert len(agents._catalogs) == CATALOGS_KEPT  # pyright: ignore[reportPrivateUsage]


def test_the_validators_of_many_schemas_are_bounded() -> None:
    for index in range(output_schema.VALIDATORS_KEPT + 5):
        schema = {"type": "object", "required": [f"k{index}"]}
        assert output_schema.parse_answer("{}", schema)[1] == f"'k{index}' is a required property"
    info = output_schema._validator_class.cache_info()  # pyright: ignore[reportPrivateUsage]
    assert info.currsize <= output_schema.VALIDATORS_KEPT
