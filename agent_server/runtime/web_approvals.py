"""The `web` approval channel (settings `approvals.web`): a question waits in the store for a page to answer.

Whichever process runs the turn (a stdio server a host spawned, an HTTP replica), the question is kept in the
session store (`SessionStore.post_question`), so every page on the same store lists it: `agent-server view`
in another terminal, or the page beside `/mcp`, of this replica or another. A page answers through
`WebApprovals.answer` (the store keeps the first answer of the question's own principal); the waiting turn
sees it at once when the page is served by this process, else at its next look (every `POLL_S`).

When no page is open the question waits all the same, up to `approvals.timeout_s` (the gate's bound, and
the question's `expires_at`), and a page opened meanwhile lists it; with no answer by then the call is not
run (recorded `timeout`). A WARNING line on stderr says, as the question goes out, where to answer it.
A mounted server's own form (elicitation) is not shown in the page: it is declined.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import anyio

from agent_server.approvals import DECLINED, ApprovalRequest, Decision, ElicitationAnswer, ElicitationRequest
from agent_server.errors import StoreError
from agent_server.events import AgentEvent, EventIds, StatusEvent
from agent_server.store.base import SessionStore
from agent_server.types import PendingApproval, new_id, utc_now

logger = logging.getLogger(__name__)

CHANNEL = "web"
POLL_S = 0.5
"""How often a waiting turn looks in the store for an answer given by a page of another process."""
ANSWERS = ("allow_once", "allow_session", "deny")
POSTED_PHASE = "approval"
"""The phase of the `status` event that says a question is in the store (`on_posted`)."""


class WebApprovals:
    """This process's side of the web view's questions: the channels of its turns, and the answers its pages give.

    `where` says where a page is (a URL when this process serves one, else how to open one): it is what the
    stderr line of each question says.
    """

    def __init__(self, where: Callable[[], str]) -> None:
        self._where = where
        self._answered: dict[str, anyio.Event] = {}

    def channel(
        self,
        store: SessionStore,
        *,
        principal: str,
        ids: EventIds,
        timeout_s: float,
        on_posted: Callable[[AgentEvent], None],
    ) -> WebApprovalChannel:
        """The channel of the turn `ids`; `on_posted` is given a `status` event (phase `approval`) once each question
        is in the store (the runtime's live feed: a page of this process then lists it at once)."""
        return WebApprovalChannel(self, store, principal=principal, ids=ids, timeout_s=timeout_s, on_posted=on_posted)

    async def answer(self, store: SessionStore, question_id: str, choice: str, *, principal: str) -> bool:
        """Answer a question for `principal`; False when it is not theirs, answered, expired or gone.

        Raises:
            StoreError: the store cannot be used.
        """
        if choice not in ANSWERS:
            return False
        if not await store.answer_question(question_id, choice, principal=principal):
            return False
        waiting = self._answered.get(question_id)
        if waiting is not None:
            waiting.set()
        return True

    async def wait(self, store: SessionStore, question: PendingApproval) -> str:
        """The question's answer, however long it takes (the gate bounds the wait)."""
        answered = self._answered[question.question_id] = anyio.Event()
        try:
            while True:
                with anyio.move_on_after(POLL_S):
                    await answered.wait()
                try:
                    answer = await store.question_answer(question.question_id)
                except StoreError as exc:  # looked for again at the next poll
                    logger.debug("could not read the answer to %s: %s", question.question_id, exc)
                    answer = None
                if answer is not None:
                    return answer
        finally:
            del self._answered[question.question_id]

    def where(self) -> str:
        return self._where()


class WebApprovalChannel:
    """The `ApprovalChannel` of one turn through the web view (see the module docstring)."""

    def __init__(
        self,
        board: WebApprovals,
        store: SessionStore,
        *,
        principal: str,
        ids: EventIds,
        timeout_s: float,
        on_posted: Callable[[AgentEvent], None],
    ) -> None:
        self._board = board
        self._store = store
        self._principal = principal
        self._ids = ids
        self._timeout_s = timeout_s
        self._on_posted = on_posted

    @property
    def name(self) -> str:
        return CHANNEL

    async def ask(self, request: ApprovalRequest) -> Decision:
        question = self._question(request)
        await self._store.post_question(question)
        waits = f"the approval of {request.tool} waits in the web view ({question.question_id})"
        self._on_posted(StatusEvent(phase=POSTED_PHASE, message=waits, **self._ids))
        logger.warning(
            "the approval of %s (session %s) waits in the web view for at most %g s: %s",
            request.tool,
            request.session_id,
            self._timeout_s,
            self._board.where(),
        )
        try:
            answer = await self._board.wait(self._store, question)
        finally:
            with anyio.CancelScope(shield=True):
                await self._drop(question.question_id)
        if answer == "deny":
            return Decision("deny", "denied in the web view")
        return Decision("allow_session" if answer == "allow_session" else "allow_once")

    async def elicit(self, request: ElicitationRequest) -> ElicitationAnswer:
        logger.info(
            "declined a form of MCP server %r: the web view does not show mounted servers' forms", request.server
        )
        return DECLINED

    def _question(self, request: ApprovalRequest) -> PendingApproval:
        now = datetime.now(UTC)
        shown = request.shown
        return PendingApproval(
            question_id=new_id("q"),
            session_id=request.session_id,
            turn_id=self._ids["turn_id"],
            call_id=request.call_id,
            tool=request.tool,
            source=request.source,
            message=request.message,
            shown=shown.text,
            cut=shown.cut,
            hidden_chars=shown.hidden_chars,
            warning=request.warning,
            choices=list(request.choices),
            default_choice=request.default_choice,
            principal=self._principal,
            created_at=utc_now(),
            expires_at=(now + timedelta(seconds=self._timeout_s)).isoformat(timespec="milliseconds"),
        )

    async def _drop(self, question_id: str) -> None:
        try:
            await self._store.drop_question(question_id)
        except StoreError as exc:  # it expires by itself
            logger.debug("could not drop the question %s: %s", question_id, exc)
