"""The approval gate end to end: a scripted turn calls a changing tool of a mounted server (untrusted, so
every call needs approval) and the MCP client is asked through `elicitation/create` (handshake era), or
cannot be asked (no capability, or 2026-07-28: no server-to-client requests) and the headless default
denies. Mounted servers' own elicitations reach the same client."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import anyio
import mcp_types as types
import pytest
from mcp.client import ClientRequestContext
from mcp.server.mcpserver import Elicit as ElicitForm
from mcp.server.mcpserver import ElicitationResult, MCPServer, Resolve
from pydantic import BaseModel

from agent_server.agent import approvals as gate_module
from tests.interaction.harness import MODES, Harness, Progress, connect, make_settings

pytestmark = pytest.mark.anyio


class Confirm(BaseModel):
    ok: bool


def ask_confirm() -> ElicitForm[Confirm]:
    return ElicitForm("Proceed with the deployment?", Confirm)


def work_server(root: Path) -> MCPServer:
    """`touch` creates a file under `root` (it changes things and says nothing of itself); `confirm` asks
    its caller a question through elicitation (in either era, via `Resolve`)."""
    server = MCPServer("work", version="1.0.0", log_level="WARNING")

    @server.tool(description="Create the file `name`")
    async def touch(name: str) -> str:  # pyright: ignore[reportUnusedFunction]
        (root / name).write_text("touched")
        return f"created {name}"

    @server.tool(description="Ask the user to confirm")
    async def confirm(  # pyright: ignore[reportUnusedFunction]
        answer: Annotated[ElicitationResult[Confirm], Resolve(ask_confirm)],
    ) -> str:
        return f"answer: {answer.action} {getattr(answer, 'data', None)}"

    return server


class User:
    """The MCP client's user: answers each `elicitation/create` by what its message names."""

    def __init__(self, answers: dict[str, dict[str, Any] | str]) -> None:
        self.answers = answers
        """message substring -> ElicitResult fields, or "never" (does not answer)."""
        self.asked: list[types.ElicitRequestFormParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append(params)
        answer = next(a for key, a in self.answers.items() if key in params.message)
        if answer == "never":
            await anyio.sleep_forever()
        assert isinstance(answer, dict)
        return types.ElicitResult.model_validate(answer)


ALLOW_ONCE = {"action": "accept", "content": {"decision": "allow_once"}}
ALLOW_SESSION = {"action": "accept", "content": {"decision": "allow_session"}}


def touching(*names: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "work__touch", "arguments": {"name": name}} for name in names]}


async def _turn(h: Harness, session_id: str | None = None) -> dict[str, Any]:
    arguments: dict[str, Any] = {"prompt": "touch it", "detail": "full"}
    if session_id is not None:
        arguments["session_id"] = session_id
    result = await h.call("run_turn", arguments)
    record = result.structured_content
    assert record["status"] == "completed", record
    return record


def _connect(tmp_path: Path, script: list[dict[str, Any]], mode: str, user: User | None, **approvals: Any) -> Any:
    root = tmp_path / "out"
    root.mkdir(exist_ok=True)
    settings = make_settings(
        tmp_path, mcpServers={"work": {"command": "unused"}}, approvals={"timeout_s": 0.5, **approvals}
    )
    return connect(
        tmp_path,
        script,
        mode=mode,
        settings=settings,
        in_process_mounts={"work": work_server(root)},
        elicitation_callback=user,
    )


def _approvals(record: dict[str, Any]) -> list[tuple[str, str]]:
    return [(a["channel"], a["decision"]) for a in record["approvals"]]


async def test_a_user_who_accepts_lets_the_call_run(tmp_path: Path) -> None:
    user = User({"work__touch": ALLOW_ONCE})
    script = [touching("a.txt"), {"expect_contains": "created a.txt", "content": "done"}]
    async with _connect(tmp_path, script, "legacy", user) as h:
        record = await _turn(h)
    assert (tmp_path / "out" / "a.txt").exists()
    assert _approvals(record) == [("elicitation", "allow_once")]
    (asked,) = user.asked
    assert "work__touch" in asked.message and '"name": "a.txt"' in asked.message
    assert asked.requested_schema["properties"]["decision"]["enum"] == ["allow_once", "allow_session", "deny"]


async def test_a_user_who_declines_keeps_the_call_from_running_and_the_model_reads_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gate_module, "UNASKED_S", 0.0)  # this client's user read the question first
    user = User({"work__touch": {"action": "decline"}})
    expected = "the user declined the approval request for work__touch"
    script = [touching("a.txt"), {"expect_contains": expected, "content": "ok, I did not"}]
    async with _connect(tmp_path, script, "legacy", user) as h:
        record = await _turn(h)
    assert not (tmp_path / "out" / "a.txt").exists()
    assert _approvals(record) == [("elicitation", "deny")]
    assert record["tool_calls"][0]["is_error"] is True and record["approval_count"] == 1


@pytest.mark.parametrize(("mode", "channel"), [("legacy", "elicitation"), ("auto", "input_required")])
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_client_that_declines_at_once_asked_nobody_and_the_model_is_told_so(
    tmp_path: Path, mode: str, channel: str, action: str
) -> None:
    """What `claude -p` and `codex exec` do with every approval form: answer `decline` within milliseconds."""
    user = User({"work__touch": {"action": action}})
    expected = "the client declined the approval request without asking anyone"
    script = [touching("a.txt"), {"expect_contains": expected, "content": "ok, I did not"}]
    async with _connect(tmp_path, script, mode, user, timeout_s=60) as h:
        result = await h.call("run_turn", {"prompt": "touch it", "detail": "full"})
    record = result.structured_content
    assert record["status"] == "completed", record
    assert not (tmp_path / "out" / "a.txt").exists()
    assert _approvals(record) == [(channel, "client_declined")]
    error = record["tool_rounds"][0]["tool_results"][0]
    assert "user" not in str(error["content"])  # no user refused anything


async def test_a_user_who_never_answers_does_not_hang_the_turn(tmp_path: Path) -> None:
    user = User({"work__touch": "never"})
    script = [touching("a.txt"), {"expect_contains": "no answer to the approval request", "content": "gave up"}]
    progress = Progress()
    async with _connect(tmp_path, script, "legacy", user) as h:  # bounded by the harness's fail_after
        result = await h.call("run_turn", {"prompt": "touch it", "detail": "full"}, progress_callback=progress)
    record = result.structured_content
    assert record["status"] == "completed", record
    assert not (tmp_path / "out" / "a.txt").exists()
    assert _approvals(record) == [("elicitation", "timeout")]
    assert "waiting for the user's approval of work__touch (at most 0.5 s)" in progress.messages


async def test_a_turn_that_times_out_while_asking_records_the_ask_cancelled(tmp_path: Path) -> None:
    user = User({"work__touch": "never"})
    async with _connect(tmp_path, [touching("a.txt")], "legacy", user, timeout_s=3600) as h:
        result = await h.call("run_turn", {"prompt": "touch it", "detail": "full", "timeout_s": 0.3})
    record = result.structured_content
    assert record["status"] == "timed_out", record
    assert not (tmp_path / "out" / "a.txt").exists()
    assert _approvals(record) == [("elicitation", "cancelled")]


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_that_cannot_be_asked_is_denied_at_once_by_the_headless_default(
    tmp_path: Path, mode: str
) -> None:
    """No elicitation capability (in either era): no channel."""
    user = None
    script = [touching("a.txt"), {"expect_contains": "nobody could be asked", "content": "cannot"}]
    async with _connect(tmp_path, script, mode, user, timeout_s=3600) as h:
        record = await _turn(h)
    assert not (tmp_path / "out" / "a.txt").exists()
    assert _approvals(record) == [("none", "no_channel")]


@pytest.mark.parametrize(
    ("answer", "created", "decision"),
    [(ALLOW_ONCE, True, "allow_once"), ({"action": "accept", "content": {"decision": "deny"}}, False, "deny")],
)
async def test_on_2026_07_28_the_user_is_asked_through_an_input_required_round(
    tmp_path: Path, answer: dict[str, Any], created: bool, decision: str
) -> None:
    """The SDK client answers the `InputRequiredResult`'s `approve-<call_id>` with its elicitation callback
    and retries; the parked turn goes on with the decision."""
    user = User({"work__touch": answer})
    expected = "created a.txt" if created else "the user denied work__touch"
    script = [touching("a.txt"), {"expect_contains": expected, "content": "done"}]
    async with _connect(tmp_path, script, "auto", user) as h:
        record = await _turn(h)
        assert h.client.protocol_version == "2026-07-28"
    assert (tmp_path / "out" / "a.txt").exists() is created
    assert _approvals(record) == [("input_required", decision)]
    (asked,) = user.asked
    assert "work__touch" in asked.message
    assert asked.requested_schema["properties"]["decision"]["enum"] == ["allow_once", "allow_session", "deny"]


async def test_allow_session_is_asked_once_and_survives_a_restart(tmp_path: Path) -> None:
    user = User({"work__touch": ALLOW_SESSION})
    script = [touching("a.txt"), {"content": "one"}, touching("b.txt"), {"content": "two"}]
    async with _connect(tmp_path, script, "legacy", user) as h:
        first = await _turn(h)
        second = await _turn(h, first["session_id"])
    assert len(user.asked) == 1
    assert _approvals(first) == [("elicitation", "allow_session")]
    assert _approvals(second) == [("session", "remembered")]
    again = User({"work__touch": {"action": "decline"}})
    async with _connect(tmp_path, [touching("c.txt"), {"content": "three"}], "legacy", again) as h:
        third = await _turn(h, first["session_id"])  # a new server process on the same store
    assert again.asked == [] and _approvals(third) == [("session", "remembered")]
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"a.txt", "b.txt", "c.txt"}


async def test_an_unanswered_ask_does_not_hold_the_other_call_of_the_round(tmp_path: Path) -> None:
    user = User({"slow.txt": "never", "fast.txt": ALLOW_ONCE})
    script = [touching("slow.txt", "fast.txt"), {"expect_contains": "created fast.txt", "content": "half"}]
    async with _connect(tmp_path, script, "legacy", user) as h:
        record = await _turn(h)
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"fast.txt"}
    assert sorted(_approvals(record)) == [("elicitation", "allow_once"), ("elicitation", "timeout")]


@pytest.mark.parametrize("mode", MODES)
async def test_a_mounted_servers_elicitation_reaches_the_user_or_is_declined(tmp_path: Path, mode: str) -> None:
    """Forwarded through the turn's channel: `elicitation/create` (legacy), an `elicit-<n>` input request of
    an `InputRequiredResult` round (2026-07-28)."""
    user = User({"Proceed with the deployment?": {"action": "accept", "content": {"ok": True}}})
    expected = "answer: accept ok=True"
    script = [
        {"tool_calls": [{"name": "work__confirm", "arguments": {}}]},
        {"expect_contains": expected, "content": "done"},
    ]
    async with _connect(tmp_path, script, mode, user, tools={"work__confirm": "allow"}) as h:
        record = await _turn(h)
    assert record["approvals"] == []  # the policy allows the call itself
    (asked,) = user.asked
    assert asked.message == "[work] Proceed with the deployment?"
    assert asked.requested_schema["properties"]["ok"]["type"] == "boolean"
