"""Agent definition files as Claude Code writes them, and the catalog that re-reads them when they change."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from agent_server.named_agents import AgentCatalog, map_tools, parse_agent_file
from agent_server.settings import AgentSettings

pytestmark = [pytest.mark.anyio]


@pytest.mark.parametrize(
    "tools",
    [
        "tools: Read, Grep, mcp__github__create_issue",
        "tools: [Read, Grep, mcp__github__create_issue]",
        "tools:\n  - Read\n  - 'Grep'\n  - mcp__github__create_issue",
    ],  # fmt: skip
    ids=["comma-separated", "flow-list", "block-list"],
)
def test_the_tools_of_a_file_in_each_yaml_form(tools: str) -> None:
    text = f'---\nname: helper\ndescription: "Helps: a lot."\n{tools}\nmodel: sonnet\n---\nBe helpful.\n'
    agent = parse_agent_file(text, stem="x", source="a.md")
    assert agent is not None
    assert agent.tools == ("read_file", "search_text", "github__create_issue")
    assert (agent.name, agent.description, agent.model, agent.instructions) == (
        "helper",
        "Helps: a lot.",
        "sonnet",
        "Be helpful.",
    )


def test_front_matter_is_yaml_as_skills_read_it(caplog: pytest.LogCaptureFixture) -> None:
    """Block scalars and comments, as real definition files use them; too deep a nesting is refused unparsed."""
    text = "---\nname: helper  # the tool's name\ndescription: >-\n  Reviews code.\n  Use after edits.\n---\nBody\n"
    agent = parse_agent_file(text, stem="x", source="a.md")
    assert agent is not None and (agent.name, agent.description) == ("helper", "Reviews code. Use after edits.")
    with caplog.at_level(logging.INFO):
        deep = "---\nname: deep\ndescription: d\ntools: " + "[" * 5000 + "\n---\n"
        assert parse_agent_file(deep, stem="deep", source="deep.md") is None
    assert "nested too deeply" in caplog.text


def test_claude_codes_names_map_to_the_built_ins_and_unknown_ones_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        mapped = map_tools(
            ["Read", "Grep", "Glob", "LS", "Write", "Edit", "MultiEdit", "Bash", "WebFetch", "fs__*"], "t"
        )
    assert mapped == ("read_file", "search_text", "list_dir", "write_file", "edit_file", "run_command", "fs__*")
    assert "'WebFetch' is not one this server has" in caplog.text


def test_files_without_a_usable_definition_are_skipped_with_a_reason(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        assert parse_agent_file("no front matter", stem="a", source="a.md") is None
        assert parse_agent_file("---\nname: b\n---\nbody", stem="b", source="b.md") is None
        assert parse_agent_file("---\nname: bad name\ndescription: d\n---\n", stem="c", source="c.md") is None
        assert parse_agent_file("---\ndescription: d\n---\n", stem="default", source="d.md") is None
        named = parse_agent_file("---\ndescription: d\ncolor: blue\n---\n", stem="from-stem", source="e.md")
    assert named is not None and named.name == "from-stem" and named.tools is None  # absent tools: all of them
    for reason in [
        "has no usable front matter: the file does not begin with a front matter line",
        "no description",
        "not a usable agent name",
        "'color' is not used",
    ]:
        assert reason in caplog.text


async def test_the_catalog_rereads_a_changed_file_and_keeps_the_first_definition(tmp_path: Path) -> None:
    claude = tmp_path / ".claude" / "agents"
    claude.mkdir(parents=True)
    (claude / "a.md").write_text("---\nname: a\ndescription: first\n---\n")
    catalog = AgentCatalog(tmp_path, {"s": AgentSettings(description="from settings")})
    first = await catalog.current()
    assert {name: a.description for name, a in first.agents.items()} == {"s": "from settings", "a": "first"}
    assert (await catalog.current()).version == first.version  # nothing changed: the same set
    ours = tmp_path / ".agents" / "agents"
    ours.mkdir(parents=True)
    (ours / "a.md").write_text("---\nname: a\ndescription: ours wins\n---\n")
    (claude / "a.md").write_text("---\nname: a\ndescription: edited\n---\n")
    os.utime(claude / "a.md", ns=(1, 1))  # a different mtime, whatever the clock's resolution
    second = await catalog.current()
    assert second.agents["a"].description == "ours wins" and second.agents["a"].source == ".agents/agents/a.md"
    assert second.version == first.version + 1
