"""The approval gate: the policy as a table, and the gate in a tool round (bounded, concurrent, remembered)."""

from __future__ import annotations

import re
from typing import Any, cast

import anyio
import pytest

from agent_server.agent import approvals as approvals_module
from agent_server.agent.approvals import ApprovalGate, approval_request, decide, masked_arguments, trusted_servers
from agent_server.agent.tool_calls import run_tool_round
from agent_server.approvals import (
    ApprovalRequest,
    Decision,
    ElicitationAnswer,
    ElicitationRequest,
    current_forwarder,
)
from agent_server.errors import ConfigError, StoreError
from agent_server.events import AgentEvent, EventIds
from agent_server.settings import ApprovalSettings, Rule, Settings, load_settings
from agent_server.store.memory import MemoryStore
from agent_server.tools.base import ProgressCallback
from agent_server.types import ApprovalRecord, TextPart, ToolAnnotations, ToolCall, ToolResult, ToolSpec

pytestmark = pytest.mark.anyio

READ = ToolAnnotations(read_only=True)
CHANGE = ToolAnnotations(read_only=False)
SILENT = ToolAnnotations()


def spec(name: str, source: str = "builtin", annotations: ToolAnnotations = SILENT) -> ToolSpec:
    return ToolSpec(name=name, source=source, annotations=annotations)


TRUSTED = frozenset({"trusted"})
POLICY_TABLE: list[tuple[ToolSpec, dict[str, Any], Rule]] = [
    # built-in and plugin tools: only a read-only one runs without asking
    (spec("read_file", annotations=READ), {}, "allow"),
    (spec("write_file", annotations=CHANGE), {}, "ask"),
    (spec("run_command"), {}, "ask"),  # says nothing: may change things
    (spec("plug", "plugin", CHANGE), {}, "ask"),
    (spec("plug_read", "plugin", READ), {}, "allow"),
    # mounted tools: read-only AND trusted, else the gate
    (spec("t__read", "mcp:trusted", READ), {}, "allow"),
    (spec("t__write", "mcp:trusted", CHANGE), {}, "ask"),
    (spec("t__silent", "mcp:trusted"), {}, "ask"),
    (spec("u__read", "mcp:untrusted", READ), {}, "ask"),  # an untrusted server's hint is only a hint
    # the default applies to calls that need approval only
    (spec("write_file", annotations=CHANGE), {"default": "allow"}, "allow"),
    (spec("write_file", annotations=CHANGE), {"default": "deny"}, "deny"),
    (spec("read_file", annotations=READ), {"default": "deny"}, "allow"),
    # a matching glob decides, read-only or not; the most specific wins
    (spec("write_file", annotations=CHANGE), {"tools": {"write_*": "allow"}}, "allow"),
    (spec("read_file", annotations=READ), {"tools": {"read_file": "deny"}}, "deny"),
    (spec("fs__write_file", "mcp:fs", CHANGE), {"tools": {"fs__*": "allow", "fs__write_*": "deny"}}, "deny"),
    (spec("fs__read_file", "mcp:fs", READ), {"tools": {"fs__*": "allow", "fs__write_*": "deny"}}, "allow"),
    (spec("fs__write_file", "mcp:fs", CHANGE), {"tools": {"*": "deny", "fs__write_file": "allow"}}, "allow"),
    (spec("write_file", annotations=CHANGE), {"tools": {"write_*": "allow", "*e_file": "ask"}}, "ask"),  # tie: stricter
    (spec("write_file", annotations=CHANGE), {"tools": {"edit_*": "allow"}, "default": "deny"}, "deny"),
]


@pytest.mark.parametrize(("tool", "policy", "expected"), POLICY_TABLE)
def test_the_policy(tool: ToolSpec, policy: dict[str, Any], expected: Rule) -> None:
    assert decide(tool, ApprovalSettings.model_validate(policy), TRUSTED) == expected


def test_a_question_shows_masked_redacted_arguments_whole() -> None:
    arguments = masked_arguments({"path": "a.txt", "api_key": "sk-123", "nested": [{"Password": "hunter2"}]})
    assert arguments == {"path": "a.txt", "api_key": "***", "nested": [{"Password": "***"}]}
    settings = Settings.model_validate(
        {"mcpServers": {"fs": {"url": "https://h/mcp", "headers": {"X-Key": "SECRETVALUE"}}}}
    )
    call = ToolCall(
        id="c1", name="fs__put", arguments={"url": "https://u:p@host/x?token=abc", "text": "the SECRETVALUE\n" * 100}
    )
    request = approval_request(call, spec("fs__put", "mcp:fs"), session_id="s", settings=settings)
    shown = request.shown.text
    assert "u:p" not in shown and "abc" not in shown and "SECRETVALUE" not in shown
    assert not request.shown.cut and shown.count("the ***\\n") == 100, "nothing is cut, nothing folded"
    assert request.message.startswith("Allow the agent to run fs__put (from mcp:fs)?\nThe whole call is shown")


# --- the gate in a tool round --------------------------------------------------------------


class Toolset:
    """Offers a changing `touch` and a read-only `look`; records what ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    async def list_tools(self) -> list[ToolSpec]:
        return [spec("touch", annotations=CHANGE), spec("look", annotations=READ)]

    async def call_tool(self, call: ToolCall, *, on_progress: ProgressCallback | None = None) -> ToolResult:
        self.ran.append(call.id)
        return ToolResult(call_id=call.id, name=call.name, content=[TextPart(text="done")])


class Channel:
    """Answers by call id: a decision, `"never"` (waits forever), or an exception to raise."""

    name = "test"

    def __init__(self, answers: dict[str, Decision | str | Exception]) -> None:
        self.answers = answers
        self.asked: list[ApprovalRequest] = []

    async def ask(self, request: ApprovalRequest) -> Decision:
        self.asked.append(request)
        answer = self.answers[request.call_id]
        if isinstance(answer, Exception):
            raise answer
        if answer == "never":
            await anyio.sleep_forever()
        assert isinstance(answer, Decision)
        return answer

    async def elicit(self, request: ElicitationRequest) -> ElicitationAnswer:
        await anyio.sleep_forever()
        raise AssertionError


async def _round(
    calls: list[ToolCall],
    channel: Channel | None,
    *,
    store: MemoryStore | None = None,
    session_id: str | None = None,
    **policy: Any,
) -> tuple[list[ToolResult], list[ApprovalRecord], Toolset]:
    store = store or MemoryStore()
    session_id = session_id or (await store.create_session(title="t", metadata={})).session_id
    tools = Toolset()
    records: list[ApprovalRecord] = []
    gate = ApprovalGate(
        settings=Settings(approvals=ApprovalSettings.model_validate({"timeout_s": 0.2, **policy})),
        store=store,
        session_id=session_id,
        channel=channel,
        specs=tools.list_tools,
        known={s.name: s for s in await tools.list_tools()},
        on_record=records.append,
    )

    async def emit(_event: AgentEvent) -> None:
        pass

    ids = EventIds(session_id=session_id, turn_id="t", trace_id="x")
    with anyio.fail_after(10):
        results = await run_tool_round(tools, calls, tool_round=1, emit=emit, ids=ids, gate=gate)
    return results, records, tools


def touch(call_id: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name="touch", arguments=arguments)


async def test_an_allowed_call_runs_and_a_read_only_one_is_never_asked() -> None:
    channel = Channel({"c1": Decision("allow_once")})
    results, records, tools = await _round([touch("c1", path="x"), ToolCall(id="c2", name="look")], channel)
    assert sorted(tools.ran) == ["c1", "c2"] and [r.is_error for r in results] == [False, False]
    assert [r.call_id for r in channel.asked] == ["c1"]
    assert channel.asked[0].shown.text == 'arguments:\n{\n  "path": "x"\n}' and channel.asked[0].source == "builtin"
    assert [(r.call_id, r.channel, r.decision) for r in records] == [("c1", "test", "allow_once")]


@pytest.mark.parametrize(
    ("answer", "decision", "why"),
    [
        (Decision("deny", "not now"), "deny", "the user denied touch: not now; the tool was not run"),
        (Decision("cancel"), "cancelled", "the user dismissed the approval request for touch; the tool was not run"),
        ("never", "timeout", "no answer to the approval request for touch within 0.2 s; the tool was not run"),
        (RuntimeError("pipe"), "error", "the approval request for touch failed (RuntimeError); the tool was not run"),
        (
            Decision(cast(Any, "maybe")),  # a channel that answers something else is not obeyed
            "error",
            "the approval channel answered 'maybe', which is not a decision; the tool was not run",
        ),
    ],
)
async def test_a_call_not_allowed_is_not_run_and_the_model_reads_why(
    answer: Decision | str | Exception, decision: str, why: str
) -> None:
    results, records, tools = await _round([touch("c1")], Channel({"c1": answer}))
    assert tools.ran == []
    assert (results[0].is_error, results[0].text()) == (True, why)
    assert [r.decision for r in records] == [decision]


async def test_a_question_the_client_refuses_at_once_was_asked_of_nobody_and_the_model_is_told_so() -> None:
    """`claude -p` and `codex exec` decline every elicitation within milliseconds: no user refused anything."""
    for answer in (Decision("deny", refused=True), Decision("cancel", refused=True)):
        results, records, tools = await _round([touch("c1")], Channel({"c1": answer}))
        assert tools.ran == [] and [r.decision for r in records] == ["client_declined"]
        text = results[0].text()
        assert "the client declined the approval request without asking anyone" in text
        assert "user" not in text


@pytest.mark.parametrize(
    ("answer", "decision", "why"),
    [
        (Decision("deny", refused=True), "deny", "the user declined the approval request for touch"),
        (Decision("cancel", refused=True), "cancelled", "the user dismissed the approval request for touch"),
    ],
)
async def test_a_question_refused_after_a_person_could_read_it_was_refused_by_the_user(
    monkeypatch: pytest.MonkeyPatch, answer: Decision, decision: str, why: str
) -> None:
    monkeypatch.setattr(approvals_module, "UNASKED_S", 0.0)  # every answer came later than a client's own
    results, records, _ = await _round([touch("c1")], Channel({"c1": answer}))
    assert [r.decision for r in records] == [decision]
    assert results[0].text() == f"{why}; the tool was not run"


async def test_without_a_channel_the_headless_policy_decides_at_once() -> None:
    results, records, tools = await _round([touch("c1")], None)
    text = results[0].text()
    assert tools.ran == [] and "nobody could be asked" in text and "denied by the headless policy" in text
    assert [(r.channel, r.decision) for r in records] == [("none", "no_channel")]
    results, records, tools = await _round([touch("c1")], None, headless="allow")
    assert tools.ran == ["c1"] and [r.decision for r in records] == ["headless_allow"]


async def test_a_policy_deny_is_not_asked() -> None:
    channel = Channel({})
    results, records, tools = await _round([touch("c1")], channel, tools={"touch": "deny"})
    assert tools.ran == [] and channel.asked == [] and "denied by the approvals policy" in results[0].text()
    assert [(r.channel, r.decision) for r in records] == [("policy", "policy_deny")]


async def test_one_unanswered_ask_does_not_hold_the_other_call_of_the_round() -> None:
    channel = Channel({"slow": "never", "fast": Decision("allow_once")})
    results, records, tools = await _round([touch("slow"), touch("fast")], channel)
    assert tools.ran == ["fast"]
    assert [(r.call_id, r.is_error) for r in results] == [("slow", True), ("fast", False)]  # call order kept
    assert sorted((r.call_id, r.decision) for r in records) == [("fast", "allow_once"), ("slow", "timeout")]


async def test_allow_session_is_remembered_in_the_store_and_not_asked_again() -> None:
    store = MemoryStore()
    session = (await store.create_session(title="t", metadata={})).session_id
    channel = Channel({"c1": Decision("allow_session")})
    await _round([touch("c1")], channel, store=store, session_id=session)
    assert await store.approved_tools(session) == {"touch"}
    results, records, tools = await _round([touch("c2")], channel, store=store, session_id=session)
    assert tools.ran == ["c2"] and [r.call_id for r in channel.asked] == ["c1"]
    assert [(r.channel, r.decision) for r in records] == [("session", "remembered")]
    other = (await store.create_session(title="o", metadata={})).session_id
    _, records, _ = await _round([touch("c3")], None, store=store, session_id=other)
    assert [r.decision for r in records] == ["no_channel"]  # remembered for that session only


async def test_a_store_that_cannot_say_what_was_remembered_means_the_user_is_asked() -> None:
    class Broken(MemoryStore):
        async def approved_tools(self, session_id: str) -> frozenset[str]:
            raise StoreError("disk on fire")

    channel = Channel({"c1": Decision("allow_once")})
    _, records, tools = await _round([touch("c1")], channel, store=Broken())
    assert tools.ran == ["c1"] and [r.decision for r in records] == ["allow_once"]


async def test_a_call_runs_with_its_turns_elicitation_forwarder_bounded_by_the_timeout() -> None:
    seen: list[ElicitationAnswer] = []

    class Forwarding(Toolset):
        async def call_tool(self, call: ToolCall, *, on_progress: ProgressCallback | None = None) -> ToolResult:
            forwarder = current_forwarder()
            assert forwarder is not None
            seen.append(await forwarder.elicit(ElicitationRequest(server="s", message="m", requested_schema={})))
            return await super().call_tool(call)

    store = MemoryStore()
    session = (await store.create_session(title="t", metadata={})).session_id
    tools = Forwarding()
    gate = ApprovalGate(
        settings=Settings(approvals=ApprovalSettings(timeout_s=0.1)),
        store=store,
        session_id=session,
        channel=Channel({}),
        specs=tools.list_tools,
        known={},
        on_record=lambda _r: None,
    )

    async def emit(_event: AgentEvent) -> None:
        pass

    ids = EventIds(session_id=session, turn_id="t", trace_id="x")
    with anyio.fail_after(10):
        await run_tool_round(tools, [ToolCall(id="c", name="look")], tool_round=1, emit=emit, ids=ids, gate=gate)
    assert seen == [ElicitationAnswer("decline")]  # the channel never answered: declined after timeout_s
    assert current_forwarder() is None


@pytest.mark.parametrize(
    ("approvals", "where"),
    [
        ({"default": "maybe"}, "approvals.default"),
        ({"tools": {"write_*": "sometimes"}}, "approvals.tools.write_*"),
        ({"headless": "ask"}, "approvals.headless"),
        ({"timeout_s": 0}, "approvals.timeout_s"),
        ({"timeout": 5}, "approvals.timeout"),
    ],
)
def test_a_bad_approvals_setting_is_refused_naming_the_key(approvals: dict[str, Any], where: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(where)):
        load_settings(overrides={"approvals": approvals})


def test_trust_is_a_mount_setting_that_defaults_to_false() -> None:
    settings = load_settings(overrides={"mcpServers": {"a": {"command": "x"}, "b": {"command": "x", "trust": True}}})
    assert trusted_servers(settings) == {"b"}
