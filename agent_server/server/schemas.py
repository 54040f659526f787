"""Generate `schemas/` (each tool's params and result JSON Schemas, and the event union) and the
`tools/list` answer the server reads at startup (`agent_server/server/tools.json`).

python -m agent_server.server.schemas          # rewrite schemas/ in the current directory, and tools.json
python -m agent_server.server.schemas --check  # exit 1 if either differs from the models
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import mcp_types as types

from agent_server.events import AGENT_EVENT_ADAPTER
from agent_server.server.listing import LISTING
from agent_server.server.tool_table import NAMES, all_tools, tool_schemas


def generate() -> dict[str, dict[str, Any]]:
    """File name -> schema document, for every file under schemas/."""
    documents: dict[str, dict[str, Any]] = {}
    for name in NAMES:
        params, result = tool_schemas(name)
        documents[f"{name}.params.json"] = params
        documents[f"{name}.result.json"] = result
    event = AGENT_EVENT_ADAPTER.json_schema(mode="serialization")
    documents["event.json"] = {"title": "AgentEvent", **event}
    return documents


def generate_listing() -> str:
    """The `tools/list` tools as JSON, in the order the server lists them."""
    tools: list[dict[str, Any]] = []
    for name, tool in all_tools().items():
        params, result = tool_schemas(name)
        wire = types.Tool(
            name=name,
            title=tool.annotations.title,
            description=tool.description,
            input_schema=params,
            output_schema=result,
            annotations=tool.annotations,
            execution=tool.execution,
        )
        tools.append(wire.model_dump(mode="json", by_alias=True, exclude_none=True))
    return json.dumps(tools, indent=1, ensure_ascii=False) + "\n"


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def drift(directory: Path) -> list[str]:
    """Names of files under `directory` that are missing, stale or extra."""
    expected = {name: render(doc) for name, doc in generate().items()}
    present = {p.name for p in directory.glob("*.json")} if directory.is_dir() else set[str]()
    stale = [n for n, text in expected.items() if n not in present or (directory / n).read_text() != text]
    listing_stale = not LISTING.is_file() or LISTING.read_text(encoding="utf-8") != generate_listing()
    return sorted(stale + [n for n in present if n not in expected]) + ([str(LISTING)] if listing_stale else [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory", nargs="?", type=Path, default=Path("schemas"))
    parser.add_argument("--check", action="store_true", help="report drift instead of writing")
    args = parser.parse_args(argv)
    directory: Path = args.directory
    if args.check:
        stale = drift(directory)
        for name in stale:
            sys.stderr.write(f"schemas drift: {directory / name}\n")
        return 1 if stale else 0
    directory.mkdir(parents=True, exist_ok=True)
    for extra in drift(directory):
        if extra not in generate() and (directory / extra).is_file():
            (directory / extra).unlink()
    for name, doc in generate().items():
        (directory / name).write_text(render(doc))
    LISTING.write_text(generate_listing(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
