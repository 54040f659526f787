from __future__ import annotations

import agent_server


def test_all_is_sorted_and_every_name_resolves() -> None:
    assert agent_server.__all__ == sorted(agent_server.__all__)
    for name in agent_server.__all__:
        assert getattr(agent_server, name) is not None
