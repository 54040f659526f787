"""The official MCP conformance suite (`@modelcontextprotocol/conformance`) against `--transport streamable-http`.

Every server scenario the suite has runs; `conformance_expected.json` records which apply to a tools-only
server and the expected result of each (with the reason, and for a failure the text every failing check
must show), and the run must match it exactly. The suite's
client speaks the handshake era only (2025-06-18 / 2025-11-25).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.thirdparty.conftest import HERE, Layout, NodeTools, http_server

pytestmark = pytest.mark.anyio

EXPECTED = HERE / "conformance_expected.json"
RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


async def conformance(tools: NodeTools, *args: str) -> str:
    command = tools.command("@modelcontextprotocol/conformance", "conformance") + list(args)
    with anyio.fail_after(60):
        done = await anyio.run_process(command, env=tools.env(), check=False)
    # Exit code 1 means "some check failed", which the expected file accounts for; anything else is trouble.
    assert done.returncode in (0, 1), f"{command}: exit {done.returncode}\n{done.stderr.decode()}"
    return done.stdout.decode()


def read_results(out: Path) -> dict[str, dict[str, Any]]:
    """scenario -> {"result": "pass"|"fail", "checks": Counter of check statuses, "failures": [messages]}."""
    results: dict[str, dict[str, Any]] = {}
    for directory in sorted(out.iterdir()):
        match = RESULT_DIR.match(directory.name)
        assert match, directory.name
        checks = json.loads((directory / "checks.json").read_text())
        failures = [f"{c['id']}: {c.get('errorMessage', '')}" for c in checks if c["status"] == "FAILURE"]
        results[match["scenario"]] = {
            "result": "fail" if failures else "pass",
            "checks": Counter(c["status"] for c in checks),
            "failures": failures,
        }
    return results


async def test_conformance_suite_matches_the_recorded_results(
    node_tools: NodeTools, layout: Layout, free_tcp_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    expected: dict[str, dict[str, Any]] = json.loads(EXPECTED.read_text())["scenarios"]
    listing = await conformance(node_tools, "list", "--server")
    offered = re.findall(r"^\s+- (\S+) \[", listing, flags=re.MULTILINE)
    assert sorted(offered) == sorted(expected), "the suite's scenarios changed: update conformance_expected.json"

    out = layout.root / "conformance"
    async with http_server(layout.server_argv([]), free_tcp_port) as url:
        await conformance(node_tools, "server", "--url", url, "--suite", "all", "--output-dir", str(out))
    results = read_results(out)

    lines, mismatches = [], []
    for scenario, want in expected.items():
        got = results.get(scenario, {"result": "not run", "checks": Counter(), "failures": []})
        counts = ", ".join(f"{n} {status.lower()}" for status, n in sorted(got["checks"].items()))
        wrong_failure = [f for f in got["failures"] if want.get("failure_contains", "") not in f]
        ok = got["result"] == want["expected"] and not wrong_failure
        tag = "applies" if want["applies"] else "n/a    "
        lines.append(f"  {'ok  ' if ok else 'DIFF'} {tag} {scenario}: {got['result']} ({counts})")
        if not ok:
            because = f" ({want['failure_contains']!r} in every failure)" if "failure_contains" in want else ""
            mismatches.append(f"{scenario}: expected {want['expected']}{because}: {want['reason']}")
            mismatches.append(f"    got {got['result']}")
            mismatches += [f"    {failure}" for failure in got["failures"]]
    applicable = [s for s, want in expected.items() if want["applies"]]
    passed = [s for s in applicable if results.get(s, {}).get("result") == "pass"]
    total = Counter(r["result"] for r in results.values())
    with capsys.disabled():
        print(f"\n[conformance {url}] {len(results)} scenarios: {total['pass']} pass, {total['fail']} fail")
        print(f"  applicable to a tools-only server: {len(passed)}/{len(applicable)} pass")
        print("\n".join(lines))
    assert not mismatches, "\n".join(mismatches)
