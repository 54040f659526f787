"""The park (DESIGN 3.8): a turn whose next step needs its client waits here for the client's answer.

Some front doors cannot send the client a request in the middle of a turn (MCP 2026-07-28 has no
server-to-client requests; an MCP task answers through `tasks/update`). There the turn runs in the
background and, when it needs the client (an approval, a call of the client's own model), *posts an
input request* to its `Park` and waits; the front door sees the pending requests (`pending`), shows them
to the client its own way, and hands the answers back (`answer`); the turn goes on.

Bounds: at most `max_pending` requests wait at once (another post is refused with `ParkFull`); each
waits at most `timeout_s` (`park_timeout_s`, default 300): past it the park gives up on the client and
the whole turn ends `cancelled`, its record saying why (`expired`). A request's key is what the client
answers by (`approve-<call_id>`, `llm-<n>`); an answer for a key nobody waits on is ignored (a late or
repeated answer must not wake another request). No MCP types: payloads and answers are whatever the
front door and the asker agree on (`ParkedApprovals`: an `ApprovalRequest` answered with a `Decision`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import anyio
import anyio.lowlevel

from agent_server.approvals import (
    DECLINED,
    ApprovalRequest,
    Decision,
    ElicitationAnswer,
    ElicitationRequest,
)
from agent_server.errors import AgentServerError

MAX_PENDING = 16
"""Requests a turn may have waiting at once: a tool round's approvals (each call asks on its own) and one
model call, with room to spare; more is refused rather than kept."""

InputKind = Literal["approval", "elicitation", "model"]


class ParkFull(AgentServerError):
    """A turn posted more input requests than its park keeps at once."""


@dataclass(frozen=True)
class InputRequest:
    """One thing a parked turn waits for from its client."""

    key: str
    """What the client answers by, unique among the turn's pending requests."""
    kind: InputKind
    payload: object
    """`ApprovalRequest` (approval), `ElicitationRequest` (a mounted server's form), or the front door's own
    request for a call of the client's model (model)."""


@dataclass
class _Slot:
    request: InputRequest
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: object = None


class Park:
    """One turn's pending input requests (see the module docstring)."""

    def __init__(self, *, timeout_s: float, max_pending: int = MAX_PENDING) -> None:
        self.timeout_s = timeout_s
        self._max_pending = max_pending
        self._slots: dict[str, _Slot] = {}
        self._counter = 0
        self._on_change: Callable[[], None] = _nothing
        self._on_expired: Callable[[str], None] = _nothing_str
        self.expired: str | None = None
        """Why the park gave up on the client (the turn's cancellation message), once it has."""

    def bind(self, *, on_change: Callable[[], None], on_expired: Callable[[str], None]) -> None:
        """Tell the turn's owner when the pending requests change, and when the client is given up on
        (`on_expired(message)` must cancel the turn)."""
        self._on_change = on_change
        self._on_expired = on_expired

    def next_key(self, prefix: str) -> str:
        """A fresh key `<prefix>-<n>` (`n` counts from 1 over the turn)."""
        self._counter += 1
        return f"{prefix}-{self._counter}"

    def pending(self) -> list[InputRequest]:
        """The requests waiting for an answer, oldest first (an answered one is gone at once, before its
        asker runs again, so the client is never shown it twice)."""
        return [slot.request for slot in self._slots.values() if not slot.answered.is_set()]

    def answer(self, key: str, value: object) -> bool:
        """Deliver the client's answer to the request `key`; False when no request waits on that key."""
        slot = self._slots.get(key)
        if slot is None or slot.answered.is_set():
            return False
        slot.answer = value
        slot.answered.set()
        self._on_change()
        return True

    async def ask(self, request: InputRequest) -> object:
        """Post `request` and wait for its answer.

        Raises:
            ParkFull: `max_pending` requests wait already, or one waits on the same key.
            ParkExpired: no answer within `timeout_s` and the turn was not cancelled by `on_expired` (the
                owner bound none).
        """
        if len(self._slots) >= self._max_pending or request.key in self._slots:
            raise ParkFull(
                f"the turn already waits for {len(self._slots)} answer(s) from the client (at most "
                f"{self._max_pending}, keys unique): {request.key} was not asked"
            )
        slot = _Slot(request)
        self._slots[request.key] = slot
        self._on_change()
        try:
            with anyio.move_on_after(self.timeout_s):
                await slot.answered.wait()
            if slot.answered.is_set():
                return slot.answer
            await self._expire(request)
            raise ParkExpired(self.expired or "")
        finally:
            del self._slots[request.key]
            self._on_change()

    async def _expire(self, request: InputRequest) -> None:
        self.expired = (
            f"the turn waited more than park_timeout_s={self.timeout_s:g} s for the client's answer to "
            f"{request.key} and was cancelled; the client did not answer (or retry) in time"
        )
        self._on_expired(self.expired)
        await anyio.lowlevel.checkpoint()  # the owner's cancellation lands here


class ParkExpired(AgentServerError):
    """No answer within `park_timeout_s` (only seen where nobody cancels the turn for it)."""


def _nothing() -> None:
    """The change callback of a park nobody follows."""


def _nothing_str(_message: str) -> None:
    """The expiry callback of a park nobody follows."""


class ParkedApprovals:
    """An `ApprovalChannel` over a turn's park: the gate's questions wait there for the front door's answer.

    An approval is posted as `approve-<call_id>` with the `ApprovalRequest`, and must be answered with a
    `Decision`; a mounted server's form as `elicit-<n>` with the `ElicitationRequest`, answered with an
    `ElicitationAnswer`. Anything else counts as a denial (a decline). The gate's own bounds
    (`approvals.timeout_s`, errors as denials) apply on top of the park's.
    """

    def __init__(self, park: Park, name: str) -> None:
        self._park = park
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    async def ask(self, request: ApprovalRequest) -> Decision:
        answer = await self._park.ask(InputRequest(f"approve-{request.call_id}", "approval", request))
        if isinstance(answer, Decision):
            return answer
        return Decision("deny", "the client's answer held no decision")

    async def elicit(self, request: ElicitationRequest) -> ElicitationAnswer:
        answer = await self._park.ask(InputRequest(self._park.next_key("elicit"), "elicitation", request))
        return answer if isinstance(answer, ElicitationAnswer) else DECLINED
