"""What the user is asked is what runs (DESIGN 3.10): the whole call, escaped, in every MCP channel (the
handshake era's `elicitation/create`, a 2026-07-28 `InputRequiredResult` round, an MCP task's
`input_required`); a call too long to show says so and defaults to deny. Protected paths are refused before
anyone is asked, or asked every time where the user opted in. Writes and the arguments kept are bounded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client import ClientRequestContext

from agent_server.settings import load_settings
from tests.interaction.harness import MODES, connect, make_settings
from tests.interaction.test_approvals import ALLOW_ONCE, ALLOW_SESSION
from tests.interaction.test_task_input import Answers
from tests.interaction.test_task_input import _run as run_as_task  # pyright: ignore[reportPrivateUsage]

pytestmark = pytest.mark.anyio

PAYLOAD = "echo PAYLOAD > pwned.txt"
HIDDEN = "ls #" + "\u200b" * 200 + "\n" + PAYLOAD
"""Before: a one-line summary cut at 200 characters showed `ls #` and invisible characters only."""
PADDED = "ls -la " + "&& echo checking the build status " * 6 + "; " + PAYLOAD
DENY = {"action": "accept", "content": {"decision": "deny"}}


class User:
    """The client's user: records each question (message and schema) and answers with `answer`."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.asked: list[types.ElicitRequestFormParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append(params)
        return types.ElicitResult.model_validate(self.answer)


def run(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "run_command", "arguments": {"command": command}}]}


def write(path: str, content: str = "x") -> dict[str, Any]:
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]}


async def _turn(tmp_path: Path, script: list[dict[str, Any]], mode: str, user: User | None, **settings: Any) -> Any:
    settings.setdefault("tools", {"exec": True, "write": True})
    async with connect(
        tmp_path, script, mode=mode, settings=make_settings(tmp_path, **settings), elicitation_callback=user
    ) as h:
        result = await h.call("run_turn", {"prompt": "go", "detail": "full"})
        return result.structured_content, h.workspace


def _decision_field(params: types.ElicitRequestFormParams) -> dict[str, Any]:
    return dict(params.requested_schema["properties"]["decision"])  # pyright: ignore[reportUnknownArgumentType]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("command", [HIDDEN, PADDED])
async def test_a_hidden_payload_is_shown_to_the_user_escaped(tmp_path: Path, mode: str, command: str) -> None:
    user = User(DENY)
    script = [run(command), {"expect_contains": "the user denied run_command", "content": "not run"}]
    record, workspace = await _turn(tmp_path, script, mode, user)
    (asked,) = user.asked
    message = asked.message
    assert message.startswith("Allow the agent to run run_command?\nThe whole call is shown below (")
    assert PAYLOAD in message, message
    assert "\u200b" not in message and ("\\u200b" * 200 in message or command == PADDED)
    assert "default" not in _decision_field(asked)  # shown whole: no preselected answer
    assert not (workspace / "pwned.txt").exists()
    assert [(a["channel"], a["decision"]) for a in record["approvals"]] == [
        ("input_required" if mode == "auto" else "elicitation", "deny")
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_too_long_to_show_says_so_and_defaults_to_deny(tmp_path: Path, mode: str) -> None:
    user = User(DENY)
    command = "echo ok " + "#" * 5000 + "\n" + PAYLOAD
    script = [run(command), {"expect_contains": "the user denied run_command", "content": "not run"}]
    await _turn(tmp_path, script, mode, user, approvals={"max_shown_chars": 1000})
    (asked,) = user.asked
    assert "NOT SHOWN IN FULL: " in asked.message and "The default answer is deny" in asked.message
    hidden = int(asked.message.split("NOT SHOWN IN FULL: ")[1].split(" ")[0].replace(",", ""))
    assert hidden == len(command) - len(asked.message.split("command:\n")[1])
    assert PAYLOAD not in asked.message
    assert _decision_field(asked)["default"] == "deny"


async def test_a_task_shows_the_whole_call_and_defaults_a_cut_one_to_deny(tmp_path: Path) -> None:
    answers = Answers(DENY)
    script = [write("a.sh", HIDDEN), write("b.sh", "echo x" + " " * 3000), {"content": "not run"}]
    record = await run_as_task(tmp_path, script, answers, approvals={"max_shown_chars": 2000})
    assert record["status"] == "completed"
    (whole, cut) = [request["params"] for request in answers.asked.values()]
    assert PAYLOAD in whole["message"] and "\\u200b" in whole["message"] and "\u200b" not in whole["message"]
    assert "default" not in whole["requestedSchema"]["properties"]["decision"]
    assert "NOT SHOWN IN FULL" in cut["message"]
    assert cut["requestedSchema"]["properties"]["decision"]["default"] == "deny"


# --- protected paths ----------------------------------------------------------------------------

ALLOW_WRITES = {"tools": {"write_file": "allow", "edit_file": "allow"}}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "path", [".mcp.json", ".VSCode/mcp.json", "sub/.claude/settings.json", ".git/hooks/post-checkout"]
)
async def test_a_write_to_a_protected_path_is_refused_whatever_the_policy(tmp_path: Path, mode: str, path: str) -> None:
    user = User(ALLOW_ONCE)
    script = [write(path), {"expect_contains": "is a protected path", "content": "refused"}]
    record, workspace = await _turn(tmp_path, script, mode, user, approvals=ALLOW_WRITES)
    assert not (workspace / path).exists()
    assert user.asked == [], "a refused write is not asked about"
    assert [(a["channel"], a["decision"]) for a in record["approvals"]] == [("protected", "policy_deny")]


async def test_a_symlink_into_a_protected_place_is_refused_too(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".cursor").mkdir(parents=True)
    (workspace / "docs").symlink_to(workspace / ".cursor", target_is_directory=True)
    script = [write("docs/mcp.json"), {"expect_contains": "is a protected path", "content": "refused"}]
    await _turn(tmp_path, script, "legacy", None, approvals=ALLOW_WRITES)
    assert list((workspace / ".cursor").iterdir()) == []


async def test_the_servers_own_config_file_is_protected(tmp_path: Path) -> None:
    """The attack: rewrite the config with `approvals.default: allow` and exec on for the next start."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    config = workspace / "agent.json"
    config.write_text(json.dumps({"tools": {"write": True}, "approvals": ALLOW_WRITES}))
    settings = load_settings(config_file=config, overrides={"workspace": str(workspace)})
    evil = json.dumps({"tools": {"write": True, "exec": True}, "approvals": {"default": "allow"}})
    script = [write("AGENT.JSON", evil), {"expect_contains": "is a protected path", "content": "refused"}]
    async with connect(tmp_path, script, mode="legacy", settings=settings) as h:
        record = (await h.call("run_turn", {"prompt": "go", "detail": "full"})).structured_content
    assert record["status"] == "completed" and "exec" not in config.read_text()


@pytest.mark.parametrize("mode", MODES)
async def test_an_opted_in_protected_path_is_asked_every_time_with_a_warning(tmp_path: Path, mode: str) -> None:
    user = User(ALLOW_SESSION)  # answered anyway: counts once, and is not remembered
    script = [
        write("notes.txt"),
        write(".vscode/settings.json", "{}"),
        write(".vscode/settings.json", '{"a": 1}'),
        {"content": "done"},
    ]
    policy = {"tools": {"write_file": "ask"}}
    options = {"write": True, "protected_ask": [".vscode/settings.json"]}
    record, workspace = await _turn(tmp_path, script, mode, user, approvals=policy, tools=options)
    assert (workspace / ".vscode" / "settings.json").read_text() == '{"a": 1}'
    first, *protected = user.asked
    assert "WARNING" not in first.message and "allow_session" in _decision_field(first)["enum"]
    assert len(protected) == 2, "asked every time, though write_file was allowed for the session"
    for asked in protected:
        assert asked.message.splitlines()[1].startswith("WARNING: '.vscode/settings.json' is a protected path")
        assert _decision_field(asked)["enum"] == ["allow_once", "deny"]
        assert _decision_field(asked)["default"] == "deny"
    decisions = [a["decision"] for a in record["approvals"]]
    assert decisions == ["allow_session", "allow_once", "allow_once"]


@pytest.mark.parametrize("mode", MODES)
async def test_an_opted_in_protected_path_is_never_allowed_by_the_policy_or_headless(tmp_path: Path, mode: str) -> None:
    script = [write(".vscode/settings.json"), {"expect_contains": "protected path", "content": "no"}]
    options = {"write": True, "protected_ask": [".vscode"]}
    approvals = {"default": "allow", "headless": "allow"}
    record, workspace = await _turn(tmp_path, script, mode, None, approvals=approvals, tools=options)
    assert not (workspace / ".vscode").exists()
    assert [(a["channel"], a["decision"]) for a in record["approvals"]] == [("none", "no_channel")]


# --- bounds -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_a_write_over_the_limit_is_refused(tmp_path: Path, mode: str) -> None:
    script = [write("big.txt", "y" * 2000), {"expect_contains": "tools.write_max_bytes", "content": "too big"}]
    options = {"write": True, "write_max_bytes": 1000}
    record, workspace = await _turn(tmp_path, script, mode, None, approvals=ALLOW_WRITES, tools=options)
    assert not (workspace / "big.txt").exists() and record["status"] == "completed"


async def test_the_record_history_and_events_keep_long_arguments_cut_while_the_call_gets_them_whole(
    tmp_path: Path,
) -> None:
    content = "z" * 300_000
    script = [write("long.txt", content), {"content": "written"}]
    settings = make_settings(tmp_path, tools={"write": True}, approvals=ALLOW_WRITES, context_window=4000)
    async with connect(tmp_path, script, mode="legacy", settings=settings) as h:
        record = (await h.call("run_turn", {"prompt": "go", "detail": "full"})).structured_content
        history = (await h.call("session_get", {"include_history": True})).structured_content["history"]
        events = h.events.events
    assert (h.workspace / "long.txt").read_text() == content
    kept = [
        record["assistant_turns"][0]["tool_calls"][0]["arguments"]["content"],
        record["tool_rounds"][0]["requested_tools"][0]["arguments"]["content"],
        next(e for e in history if e["message"]["role"] == "assistant")["message"]["tool_calls"][0]["arguments"][
            "content"
        ],
        next(e for e in events if e["type"] == "tool_start")["call"]["arguments"]["content"],
    ]
    for value in kept:
        assert len(value) < 10_000 and value.startswith("zzz")
        assert value.endswith("more characters; the call ran with the whole value]")
    assert len(json.dumps(record)) < 30_000


async def test_the_state_database_does_not_grow_with_a_huge_write(tmp_path: Path) -> None:
    content = "q" * 5_000_000
    script = [write("huge.txt", content), {"content": "written"}]
    options = {"write": True, "write_max_bytes": 10_000_000}
    settings = make_settings(tmp_path, tools=options, approvals=ALLOW_WRITES)
    async with connect(tmp_path, script, mode="legacy", settings=settings) as h:
        with anyio.fail_after(20):
            await h.call("run_turn", {"prompt": "go"})
    stored = sum(p.stat().st_size for p in (tmp_path / "state").rglob("*") if p.is_file())
    assert (h.workspace / "huge.txt").stat().st_size == 5_000_000
    assert stored < 2_000_000, f"the store holds {stored} bytes for one 5 MB write"
