"""The import-direction contract of DESIGN.md section 4, checked by scanning every module's imports."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "agent_server"
LEAVES = {
    "types",
    "errors",
    "events",
    "redaction",
    "child_process",
    "approvals",
    "lines",
    "ids",
    "nesting",
    "presentation",
    "telemetry",
    "trace_context",
    "version",
    "turn_options",
}
ADAPTERS = {"llm", "tools", "store", "mounts"}
# What anyone may call in an adapter package: its protocols and the mount configuration (settings validate it).
INTERFACES = {"llm.base", "tools.base", "store.base", "mounts.base", "mounts.config"}
# The composition root: the only modules outside the adapters that pick (call or construct) a concrete
# implementation. `runtime` is its home; the `server.*` entries are where it lives until then.
COMPOSITION_ROOT = {"runtime", "runtime.choice", "runtime.parts"}


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


@functools.cache  # parsed once for all the tests below (read only)
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


@functools.cache
def _module_graph() -> dict[str, set[str]]:
    """Each module of the package -> the modules of the package it imports, anywhere in the file (lazy and
    `TYPE_CHECKING` imports included). `from pkg import mod` is an import of `pkg.mod`, not of `pkg`'s
    `__init__` (which every submodule's import runs anyway: that is no dependency)."""
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    found.add(sub if sub in paths else node.module)
        graph[module] = {name for name in found if name in paths and name != module}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for name in sorted(graph[module]):
            if name not in index:
                visit(name)
                low[module] = min(low[module], low[name])
            elif name in stack:
                low[module] = min(low[module], index[name])
        if low[module] == index[module]:
            component: list[str] = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def test_import_cycles_are_found_lazy_ones_included() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set[str]()}
    assert import_cycles(graph) == [["a", "b", "c"]]


def test_no_module_of_the_package_is_part_of_an_import_cycle() -> None:
    cycles = import_cycles(_module_graph())
    assert not cycles, "import cycles (lazy imports count): " + "; ".join(" <-> ".join(c) for c in cycles)


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


def test_mounts_build_on_the_toolset_seam_and_its_generic_wrappers_only() -> None:
    for module, imports in _package_imports().items():
        if _top(module) != "mounts":
            continue
        for name in imports:
            top = _top(name)
            allowed = LEAVES | {"settings", "mounts", "mcp", "mcp_types"}
            assert top in allowed or name.startswith(("tools.base", "tools.wrappers")), f"{module}: {name}"


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


def _bindings(tree: ast.AST) -> dict[str, str]:
    """Each local name an import binds, mapped to the dotted name it stands for."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                bound[name] = alias.name if alias.asname else name
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def _dotted(node: ast.expr, bound: dict[str, str]) -> str | None:
    """`a.b.c` with `a` resolved through the imports, or None when the callee is not an imported name."""
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, bound)
        return f"{base}.{node.attr}" if base else None
    return None


def _is_concrete(name: str) -> bool:
    """`llm.scripted.ScriptedLLM` is; `llm.base.LLMClient`, `settings.Settings` and `len` are not."""
    parts = name.split(".")
    return parts[0] in ADAPTERS and len(parts) > 2 and ".".join(parts[:2]) not in INTERFACES


def picks(source: str) -> set[str]:
    """The concrete adapter classes and functions that the source calls (constructing one is a call)."""
    tree = ast.parse(source)
    bound = _bindings(tree)
    called = (_dotted(node.func, bound) for node in ast.walk(tree) if isinstance(node, ast.Call))
    inside = (name.removeprefix("agent_server.") for name in called if name and name.startswith("agent_server."))
    return {name for name in inside if _is_concrete(name)}


def test_picks_finds_constructions_however_imported() -> None:
    source = """
from agent_server.store.sqlite import SqliteStore
from agent_server.llm import scripted
import agent_server.tools.registry as registry
import agent_server.mounts.toolset
from agent_server.llm.base import LLMClient
from agent_server.mounts.config import parse_mcp_servers
from agent_server.settings import Settings
def build(path, llm: LLMClient):
    parse_mcp_servers({}), Settings(), len([])
    store, llm = SqliteStore(path), scripted.ScriptedLLM([])
    return store, llm, registry.ToolRegistry([]), agent_server.mounts.toolset.MountManager([])
"""
    assert picks(source) == {
        "store.sqlite.SqliteStore",
        "llm.scripted.ScriptedLLM",
        "tools.registry.ToolRegistry",
        "mounts.toolset.MountManager",
    }


def test_only_the_composition_root_picks_concrete_implementations() -> None:
    for path in PACKAGE.rglob("*.py"):
        module = _module_name(path).removeprefix("agent_server").lstrip(".")
        if _top(module) in ADAPTERS or module in COMPOSITION_ROOT:
            continue
        picked = picks(path.read_text())
        assert not picked, f"{module} picks {picked}: only the composition root {sorted(COMPOSITION_ROOT)} may"


def test_the_doors_kit_imports_the_runtime_and_leaves_never_a_door_nor_a_protocol_library() -> None:
    for module, imports in _package_imports().items():
        if _top(module) != "doors":
            continue
        allowed = LEAVES | {"doors", "runtime", "settings"}
        bad = {i for i in imports if _top(i) not in allowed}
        assert not bad, f"{module} imports {bad}"
        assert not {"mcp", "mcp_types"} & imports, f"{module} imports the MCP SDK"
        assert "acp" not in _third_party(module), f"{module} imports the ACP library"


def _third_party(module: str) -> set[str]:
    path = PACKAGE.joinpath(*module.split("."))
    file = path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"
    return {name.split(".")[0] for name in _imports(file) if not name.startswith("agent_server")}


def test_the_acp_front_door_imports_the_runtime_never_a_concrete_part_nor_the_mcp_one() -> None:
    concrete = {"llm", "tools", "store", "agent"}
    for module, imports in _package_imports().items():
        if _top(module) != "acp":
            continue
        bad = {i for i in imports if _top(i) in concrete and i.split(".")[1:2] != ["base"]}
        bad |= {i for i in imports if _top(i) == "mounts" and not i.startswith("mounts.config")}
        bad |= {i for i in imports if _top(i) in {"server", "cli"} or i in {"mcp", "mcp_types"}}
        assert not bad, f"{module} imports {bad}: go through agent_server.runtime"
    server = {i for module, imports in _package_imports().items() if _top(module) == "server" for i in imports}
    assert not {i for i in server if _top(i) == "acp"}, "the MCP front door imports the ACP one"


def test_tracing_builds_on_the_leaves_and_the_model_protocol_only() -> None:
    """The OpenTelemetry adapter sees the hooks' leaf types, the settings and `llm.base`: no concrete part."""
    for module, imports in _package_imports().items():
        if _top(module) != "tracing":
            continue
        allowed = LEAVES | {"settings", "tracing"}
        bad = {i for i in imports if _top(i) not in allowed and not i.startswith("llm.base")}
        assert not bad, f"{module} imports {bad}"
