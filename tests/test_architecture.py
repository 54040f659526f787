"""The import-direction contract of DESIGN.md section 4, checked by scanning every module's imports."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "agent_server"
LEAVES = {"types", "errors", "events", "redaction"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every module imported anywhere in the file (lazy imports inside functions included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _package_imports() -> dict[str, set[str]]:
    result: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        imports = {i.removeprefix("agent_server.") for i in _imports(path) if i.startswith("agent_server.")}
        sdk = {"mcp" for i in _imports(path) if i == "mcp" or i.startswith("mcp.")}
        wire = {"mcp_types" for i in _imports(path) if i.split(".")[0] == "mcp_types"}
        result[_module_name(path).removeprefix("agent_server").lstrip(".")] = imports | sdk | wire
    return result


def _top(name: str) -> str:
    return name.split(".")[0]


def test_leaves_import_nothing_from_the_package() -> None:
    for module, imports in _package_imports().items():
        if module in LEAVES:
            bad = {i for i in imports if _top(i) not in LEAVES | {"mcp", "mcp_types"}}
            assert not bad, f"{module} imports {bad}"


def test_adapters_import_only_leaves_settings_and_their_own_package() -> None:
    for module, imports in _package_imports().items():
        layer = _top(module)
        if layer not in {"llm", "tools", "store"}:
            continue
        allowed = LEAVES | {"settings", layer}
        bad = {i for i in imports if _top(i) not in allowed and i not in {"mcp", "mcp_types"}}
        assert not bad, f"{module} imports {bad}"
        assert "mcp" not in imports, f"{module} imports the MCP SDK runtime"
        if "mcp_types" in imports:  # wire types only, for the sampling provider
            assert module == "llm.sampling", f"{module} imports mcp_types"


def test_agent_imports_only_protocols_never_adapters_or_mcp() -> None:
    for module, imports in _package_imports().items():
        if _top(module) != "agent":
            continue
        assert not {"mcp", "mcp_types"} & imports, f"{module} imports the MCP SDK"
        for name in imports:
            top = _top(name)
            if top in {"llm", "tools", "store", "mounts"}:
                assert name.split(".")[1] == "base", f"{module} imports the concrete {name}"
            else:
                assert top in LEAVES | {"settings", "agent"}, f"{module} imports {name}"


def test_mounts_build_on_tools_base_only() -> None:
    for module, imports in _package_imports().items():
        if _top(module) != "mounts":
            continue
        for name in imports:
            top = _top(name)
            allowed = LEAVES | {"settings", "mounts", "mcp", "mcp_types"}
            assert top in allowed or name.startswith("tools.base"), f"{module}: {name}"


def test_nothing_below_the_server_imports_the_server_or_cli() -> None:
    for module, imports in _package_imports().items():
        if _top(module) in {"server", "cli", "__main__", ""}:
            continue
        bad = {i for i in imports if _top(i) in {"server", "cli"}}
        assert not bad, f"{module} imports {bad}"


def test_the_mcp_front_door_imports_the_runtime_never_a_concrete_part() -> None:
    concrete = {"llm", "tools", "store", "mounts", "agent"}
    for module, imports in _package_imports().items():
        if _top(module) != "server":
            continue
        bad = {i for i in imports if _top(i) in concrete and i.split(".")[1:2] != ["base"]}
        assert not bad, f"{module} imports {bad}: go through agent_server.runtime"
