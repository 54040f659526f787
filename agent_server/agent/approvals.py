"""The approval gate in front of tool execution (DESIGN 3.7): the policy, the bounded ask, the record.

`decide` is the whole policy, one pure function. `ApprovalGate.check` applies it to one call of a tool
round: a call that needs asking goes to the turn's `ApprovalChannel` (see `agent_server.approvals`),
bounded by `approvals.timeout_s` (the turn's own deadline cancels it sooner); every way that ends other
than an allow (a denial, a dismissal, no answer in time, a channel error, no channel, a client that declined
without asking anyone) means the call is not run and the model reads why, naming who refused: the user, the
client (`UNASKED_S`), or the policy. The calls of a round are checked concurrently (each in its own task of
`run_tool_round`), so a slow answer holds only its own call. `allow_session` is remembered in the store
for (session, tool) and later calls of that tool in the session are not asked again.

Before the policy, the toolset may screen a call (`screen`, DESIGN 3.10): a write to a protected path is
refused outright (recorded `policy_deny` on channel `protected`, the user is not asked), and one to a
protected path the user opted in to is asked every time with a warning: never allowed by the policy, by a
remembered `allow_session`, or by `approvals.headless`. What the user is shown of a call is built once,
here (`approval_request`, with `agent_server.presentation.present_call`), for every channel.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from agent_server.approvals import (
    DECLINED,
    ApprovalChannel,
    ApprovalRequest,
    Decision,
    ElicitationAnswer,
    ElicitationRequest,
)
from agent_server.errors import StoreError
from agent_server.presentation import cap_arguments, present_call
from agent_server.redaction import MASK
from agent_server.settings import ApprovalSettings, Rule, Settings
from agent_server.store.base import SessionStore
from agent_server.tools.base import Screening
from agent_server.types import ApprovalOutcome, ApprovalRecord, ToolCall, ToolSpec, one_line

logger = logging.getLogger(__name__)

REASON_CHARS = 200
"""How much of a user's or a channel's reason for a refusal the model reads."""
UNASKED_S = 0.25
"""A question declined or dismissed (`Decision.refused`) sooner than this was refused by the client without
asking anyone (a headless host declines every question within milliseconds; a person reads first): the record
says `client_declined`, and the model is told that nobody was asked, not that the user refused."""
_SECRET_KEY = re.compile(r"pass(word|phrase)?|secret|token|api[-_]?key|auth|credential|private[-_]?key", re.I)
_STRICTNESS: dict[Rule, int] = {"deny": 0, "ask": 1, "allow": 2}
_MAX_DEPTH = 20


# --- the policy -------------------------------------------------------------------------------


def needs_approval(spec: ToolSpec, trusted_servers: frozenset[str]) -> bool:
    """A built-in or plugin tool unless it says read-only; a mounted tool unless it says read-only AND its
    server is trusted (an untrusted server's annotations are hints only)."""
    if spec.annotations.read_only is not True:
        return True
    server = spec.source.removeprefix("mcp:") if spec.source.startswith("mcp:") else None
    return server is not None and server not in trusted_servers


def matching_rule(tool: str, rules: dict[str, Rule]) -> Rule | None:
    """The rule of the most specific glob matching `tool`: the exact name, else the glob with the most
    literal characters; a tie goes to the stricter rule (deny, ask, allow). None when none matches."""
    from fnmatch import fnmatchcase

    if tool in rules:
        return rules[tool]
    matches = [pattern for pattern in rules if fnmatchcase(tool, pattern)]
    if not matches:
        return None
    return rules[max(matches, key=lambda pattern: (_literal_chars(pattern), -_STRICTNESS[rules[pattern]]))]


def _literal_chars(pattern: str) -> int:
    return len(re.sub(r"\[[^\]]*\]|[*?]", "", pattern))


def decide(spec: ToolSpec, policy: ApprovalSettings, trusted_servers: frozenset[str]) -> Rule:
    """What the gate does with a call of `spec`: `allow` (run it), `ask` the user, or `deny`.

    A glob in `policy.tools` that matches decides (for any tool, read-only ones included); otherwise a
    tool that needs no approval is allowed and one that does follows `policy.default`.
    """
    rule = matching_rule(spec.name, policy.tools)
    if rule is not None:
        return rule
    return policy.default if needs_approval(spec, trusted_servers) else "allow"


def trusted_servers(settings: Settings) -> frozenset[str]:
    return frozenset(name for name, config in settings.mcp_servers.items() if config.trust)


# --- what the user is shown -------------------------------------------------------------------


def masked_arguments(value: Any, depth: int = 0) -> Any:
    """`value` with the values of secret-looking keys (`password`, `token`, `api_key`, ...) masked."""
    if depth > _MAX_DEPTH:
        return MASK
    if isinstance(value, dict):
        items: dict[str, Any] = value  # pyright: ignore[reportUnknownVariableType]
        return {k: MASK if _SECRET_KEY.search(str(k)) else masked_arguments(v, depth + 1) for k, v in items.items()}
    if isinstance(value, list):
        return [masked_arguments(v, depth + 1) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


def approval_request(
    call: ToolCall, spec: ToolSpec, *, session_id: str, settings: Settings, warning: str | None = None
) -> ApprovalRequest:
    """The question about `call`: its arguments masked, shown faithfully (`present_call`: whole and escaped,
    or cut saying so), with the warning of a protected path."""
    arguments = masked_arguments(call.arguments)
    limit = settings.approvals.max_shown_chars
    shown = present_call(
        call.name, arguments, builtin=spec.source == "builtin", secrets=_secrets(settings), max_chars=limit
    )
    return ApprovalRequest(
        tool=call.name,
        arguments=cap_arguments(arguments, limit),
        shown=shown,
        source=spec.source,
        session_id=session_id,
        kind=spec.kind,
        call_id=call.id,
        warning=warning,
    )


def _secrets(settings: Settings) -> tuple[str, ...]:
    return tuple(secret for config in settings.mcp_servers.values() for secret in config.secrets)


# --- the gate ---------------------------------------------------------------------------------

Refusal = str
"""Why a call was not run, as the model reads it."""
PROTECTED_CHANNEL = "protected"
"""The `channel` of a record of a call refused for its protected path (its `decision` is `policy_deny`)."""

_Outcome = tuple[ApprovalOutcome, str]


@dataclass(kw_only=True)
class ApprovalGate:
    """The gate of one turn (see the module docstring). `check` returns None to run the call."""

    settings: Settings
    store: SessionStore
    session_id: str
    channel: ApprovalChannel | None
    specs: Callable[[], Awaitable[list[ToolSpec]]]
    """The tools as offered now: looked up for a name the turn's own listing (`known`) lacks."""
    known: dict[str, ToolSpec]
    on_record: Callable[[ApprovalRecord], None]
    on_asking: Callable[[str], Awaitable[None]] | None = None
    """Told, before a question goes out, what the turn now waits for (a status line for the caller)."""
    screen: Callable[[ToolCall], Awaitable[Screening | None]] | None = None
    """The toolset's word on a call before the policy (`tools.base.ScreensCalls`): refuse it (a protected
    path), or ask the user every time with a warning (an opted-in protected path)."""
    _remembered: set[str] | None = field(default=None, init=False)
    _loading: anyio.Lock = field(default_factory=anyio.Lock, init=False)
    _forwarder: _Forwarder | None = field(default=None, init=False)
    _user_allowed: set[str] = field(default_factory=set[str], init=False)

    @property
    def policy(self) -> ApprovalSettings:
        return self.settings.approvals

    def user_allowed(self, call_id: str) -> bool:
        """Whether the user's own answer allowed the call `call_id` (not the policy nor a remembered answer)."""
        return call_id in self._user_allowed

    async def check(self, call: ToolCall) -> Refusal | None:
        spec = await self._spec(call.name)
        if spec is None:
            return None  # not offered: the registry answers "unknown tool" and runs nothing
        start = anyio.current_time()

        def record(decision: ApprovalOutcome, channel: str) -> ApprovalRecord:
            latency = anyio.current_time() - start
            approval = ApprovalRecord(
                call_id=call.id, tool=call.name, channel=channel, decision=decision, latency_s=latency
            )
            self.on_record(approval)
            return approval

        screening = await self.screen(call) if self.screen is not None else None
        if screening is not None and screening.refusal is not None:
            record("policy_deny", PROTECTED_CHANNEL)
            return screening.refusal
        warning = screening.warning if screening is not None else None
        rule = decide(spec, self.policy, trusted_servers(self.settings))
        if warning is not None and rule == "allow":
            rule = "ask"  # an opted-in protected path: asked every time, never allowed by the policy
        if rule == "allow":
            return None
        try:
            decision, why, channel = await self._settle(call, spec, rule, warning)
        except anyio.get_cancelled_exc_class():  # the turn was cancelled or timed out while the user was asked
            record("cancelled", self.channel.name if self.channel is not None else "none")
            raise
        if not record(decision, channel).allowed:
            return f"{why}; the tool was not run"
        if decision in ("allow_once", "allow_session"):
            self._user_allowed.add(call.id)
        if decision == "allow_session":
            await self._remember(call.name)
        return None

    async def _settle(
        self, call: ToolCall, spec: ToolSpec, rule: Rule, warning: str | None
    ) -> tuple[ApprovalOutcome, str, str]:
        """The outcome, why (for the model, when not allowed), and the channel that settled it. A call with a
        `warning` is always asked: not remembered, and denied when nobody can be asked."""
        if rule == "deny":
            return "policy_deny", f"{call.name} is denied by the approvals policy", "policy"
        if warning is None and call.name in await self._remembered_tools():
            return "remembered", "", "session"
        if self.channel is None:
            if warning is not None:
                why = f"{call.name} writes to a protected path, which needs the user's own answer: no approval channel"
                return "no_channel", why, "none"
            return (*self._headless(call.name), "none")
        request = approval_request(call, spec, session_id=self.session_id, settings=self.settings, warning=warning)
        outcome, why = await self._ask(request, self.channel)
        if outcome == "allow_session" and not request.remembers:
            outcome = "allow_once"  # not offered for a protected path; not remembered if answered anyway
        return outcome, why, self.channel.name

    def forwarder(self) -> _Forwarder | None:
        """The way a mounted server's elicitation reaches this turn's user, bounded; None without a channel.
        One per turn: a mounted server tells the turns it could ask apart by it."""
        if self.channel is not None and self._forwarder is None:
            self._forwarder = _Forwarder(self.channel, self.policy.timeout_s)
        return self._forwarder

    async def _spec(self, name: str) -> ToolSpec | None:
        if name not in self.known:
            self.known.update({spec.name: spec for spec in await self.specs()})
        return self.known.get(name)

    def _headless(self, tool: str) -> _Outcome:
        if self.policy.headless == "allow":
            return "headless_allow", ""
        return "no_channel", (
            f"{tool} needs approval and nobody could be asked (this turn's client has no way to show the question, "
            "e.g. it declares no form elicitation): denied by the headless policy, approvals.headless"
        )

    async def _ask(self, request: ApprovalRequest, channel: ApprovalChannel) -> _Outcome:
        tool = request.tool
        timeout = self.policy.timeout_s
        if self.on_asking is not None:
            await self.on_asking(f"waiting for the user's approval of {tool} (at most {timeout:g} s)")
        decision: Decision | None = None
        start = anyio.current_time()
        try:
            with anyio.move_on_after(timeout):
                decision = await channel.ask(request)
        except Exception as exc:
            logger.warning("the approval request for %s failed: %s: %s", tool, type(exc).__name__, exc)
            return "error", f"the approval request for {tool} failed ({type(exc).__name__})"
        if decision is None:
            return "timeout", f"no answer to the approval request for {tool} within {timeout:g} s"
        took = anyio.current_time() - start
        if decision.refused and took < UNASKED_S:
            return "client_declined", (
                f"{tool} needs approval, and the client declined the approval request without asking anyone "
                f"(it answered in {took * 1000:.0f} ms; a headless client such as `claude -p` or `codex exec` "
                "declines every one): nobody refused it, but it cannot run here unless the approvals policy allows it"
            )
        return _outcome_of(tool, decision)

    async def _remembered_tools(self) -> set[str]:
        async with self._loading:  # the calls of a round check concurrently: load once
            if self._remembered is None:
                try:
                    self._remembered = set(await self.store.approved_tools(self.session_id))
                except StoreError as exc:  # nothing counts as remembered: the user is asked (read again next call)
                    logger.warning("could not read the approvals of session %s: %s", self.session_id, exc)
                    return set()
        return self._remembered

    async def _remember(self, tool: str) -> None:
        (await self._remembered_tools()).add(tool)
        try:
            await self.store.remember_approval(self.session_id, tool)
        except StoreError as exc:  # this call still runs; a later turn will ask again
            logger.warning("could not remember the approval of %s for session %s: %s", tool, self.session_id, exc)


def _outcome_of(tool: str, decision: Decision) -> _Outcome:
    reason = f": {one_line(decision.reason, REASON_CHARS)}" if decision.reason else ""
    choice: str = decision.choice  # a channel of a third party may answer anything: only these four count
    if choice == "allow_once":
        return "allow_once", ""
    if choice == "allow_session":
        return "allow_session", ""
    if choice == "deny":
        if decision.refused:
            return "deny", f"the user declined the approval request for {tool}{reason}"
        return "deny", f"the user denied {tool}{reason}"
    if choice == "cancel":
        return "cancelled", f"the user dismissed the approval request for {tool}{reason}"
    return "error", f"the approval channel answered {one_line(repr(choice), 40)}, which is not a decision"


@dataclass(frozen=True)
class _Forwarder:
    channel: ApprovalChannel
    timeout_s: float

    async def elicit(self, request: ElicitationRequest) -> ElicitationAnswer:
        """The user's answer to a mounted server's form; declined on timeout or a channel error."""
        try:
            with anyio.move_on_after(self.timeout_s):
                return await self.channel.elicit(request)
        except Exception as exc:
            logger.warning("forwarding an elicitation of %s failed: %s: %s", request.server, type(exc).__name__, exc)
            return DECLINED
        logger.info("an elicitation of MCP server %r got no answer within %g s", request.server, self.timeout_s)
        return DECLINED
