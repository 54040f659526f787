"""A mounted server's elicitation goes to the one turn whose call is in flight, or is declined."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
from mcp.client import ClientRequestContext

from agent_server.approvals import ElicitationAnswer, ElicitationRequest
from agent_server.mounts.elicitation import MAX_MESSAGE_CHARS, ElicitationRelay

pytestmark = pytest.mark.anyio

FORM = types.ElicitRequestFormParams(
    message="Proceed?", requested_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}}
)


class Forwarder:
    def __init__(self, answer: ElicitationAnswer) -> None:
        self.answer = answer
        self.seen: list[ElicitationRequest] = []

    async def elicit(self, request: ElicitationRequest) -> ElicitationAnswer:
        self.seen.append(request)
        return self.answer


CONTEXT: Any = ClientRequestContext.__new__(ClientRequestContext)  # the relay does not read it


async def test_the_one_turn_in_flight_is_asked_and_its_answer_returned() -> None:
    relay = ElicitationRelay("work")
    forwarder = Forwarder(ElicitationAnswer("accept", {"ok": True}))
    with relay.calling(forwarder), relay.calling(forwarder):  # two calls of the same turn
        result = await relay.handle(CONTEXT, FORM)
    assert result == types.ElicitResult(action="accept", content={"ok": True})
    assert forwarder.seen == [
        ElicitationRequest(server="work", message="Proceed?", requested_schema=FORM.requested_schema)
    ]


@pytest.mark.parametrize("case", ["no call", "a call without a channel", "two turns", "url", "oversized", "bad answer"])
async def test_declined_when_nobody_or_not_one_user_can_answer(case: str) -> None:
    relay = ElicitationRelay("work")
    one, other = Forwarder(ElicitationAnswer("accept", {"ok": True})), Forwarder(ElicitationAnswer("accept"))
    params: types.ElicitRequestParams = FORM
    forwarders: list[Any] = [one]
    if case == "no call":
        forwarders = []
    elif case == "a call without a channel":
        forwarders = [None]
    elif case == "two turns":
        forwarders = [one, other]
    elif case == "url":
        params = types.ElicitRequestURLParams(message="Log in", url="https://example.com", elicitation_id="e1")
    elif case == "oversized":
        params = FORM.model_copy(update={"message": "x" * (MAX_MESSAGE_CHARS + 1)})
    elif case == "bad answer":
        one.answer = ElicitationAnswer("accept", {"ok": {"nested": "not a flat form"}})
    first, second = (forwarders + [None, None])[:2]
    with relay.calling(first), relay.calling(second):
        result = await relay.handle(CONTEXT, params)
    assert result == types.ElicitResult(action="decline")
    if case != "bad answer":
        assert one.seen == [] and other.seen == []
