"""Code size of `agent_server/`: the longest module and function, and line medians and p90.

Module length is the file's line count. Function length is `end_lineno - lineno + 1` of its AST node (the
`def` line to the last line of the body, decorators excluded). Every function and method is one entry,
nested ones included: a nested function is counted on its own, and its lines also count in its parent's span.
These are counts, not timings, so they are exact and need no pairing.

    python bench/code_size.py [--root agent_server] [--top 5] [--json]
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_ROOT = REPO / "agent_server"


@dataclass(frozen=True)
class Item:
    name: str
    path: str
    line: int
    lines: int


def functions(tree: ast.AST, path: str) -> list[Item]:
    """Every function and method in `tree`, with a dotted qualified name (`Class.method`, `outer.inner`)."""
    found: list[Item] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                qualname = f"{prefix}{child.name}"
                end = child.end_lineno or child.lineno
                found.append(Item(qualname, path, child.lineno, end - child.lineno + 1))
                visit(child, f"{qualname}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def p90(values: list[int]) -> float:
    if len(values) == 1:
        return float(values[0])
    return statistics.quantiles(values, n=10, method="inclusive")[8]


def measure(root: Path, top: int) -> dict[str, Any]:
    modules: list[Item] = []
    funcs: list[Item] = []
    for file in sorted(root.rglob("*.py")):
        rel = file.relative_to(root.parent).as_posix()
        text = file.read_text(encoding="utf-8")
        modules.append(Item(rel, rel, 1, len(text.splitlines())))
        funcs += functions(ast.parse(text, filename=rel), rel)
    if not modules or not funcs:
        raise SystemExit(f"no Python modules or functions under {root}")
    modules.sort(key=lambda m: -m.lines)
    funcs.sort(key=lambda f: -f.lines)
    mod_lines = [m.lines for m in modules]
    fn_lines = [f.lines for f in funcs]
    return {
        "root": root.name,
        "modules": {
            "count": len(modules),
            "total_lines": sum(mod_lines),
            "median": statistics.median(mod_lines),
            "p90": round(p90(mod_lines), 1),
            "longest": [asdict(m) for m in modules[:top]],
        },
        "functions": {
            "count": len(funcs),
            "median": statistics.median(fn_lines),
            "p90": round(p90(fn_lines), 1),
            "longest": [asdict(f) for f in funcs[:top]],
        },
    }


def render(r: dict[str, Any]) -> str:
    m, f = r["modules"], r["functions"]
    longest_m, longest_f = m["longest"][0], f["longest"][0]
    lines = [
        f"code size of {r['root']}/: {m['count']} modules, {m['total_lines']} lines, {f['count']} functions",
        f"longest module: {longest_m['path']} ({longest_m['lines']} lines)",
        f"longest function: {longest_f['name']} at {longest_f['path']}:{longest_f['line']}"
        f" ({longest_f['lines']} lines)",
        f"module lines median: {m['median']:g}, p90: {m['p90']:g}",
        f"function lines median: {f['median']:g}, p90: {f['p90']:g}",
        "top modules: " + ", ".join(f"{x['path']} {x['lines']}" for x in m["longest"]),
        "top functions: " + ", ".join(f"{x['name']} ({x['path']}) {x['lines']}" for x in f["longest"]),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="package directory (default agent_server/)")
    parser.add_argument("--top", type=int, default=5, help="entries in the top lists (default 5)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.top < 1:
        parser.error("--top must be >= 1")
    result = measure(args.root.resolve(), args.top)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
