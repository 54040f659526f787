"""A parked turn's input requests on the MCP wire (2026-07-28), both ways: one place for tasks and MRTR.

A turn parked on 2026-07-28 (`agent_server.runtime.park`) waits for its client; the client sees what it
waits for as `inputRequests` (an MCP task's `input_required` in `tasks/get`, or a `run_turn`'s
`InputRequiredResult`) and answers with `inputResponses` (`tasks/update`, or the retried `tools/call`):

- `approve-<call_id>`: the approval question, an `elicitation/create` form with the flat `decision` schema
  (`approval_channel.approval_form`); its `ElicitResult` becomes the gate's `Decision`.
- `elicit-<n>`: a mounted server's own form, passed on; its `ElicitResult` goes back to that server.
- `llm-<n>`: a call of the client's model, a `sampling/createMessage` request (`client_model.ParkedSampling`); its
  `CreateMessageResult` is the model's answer.

An answer that does not parse as what its key asked for is still delivered, as a refusal: a denial, a
decline, or a model error, so a bad answer never leaves the turn waiting. Answers for keys nobody waits
on are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from pydantic import BaseModel, ValidationError

from agent_server.approvals import DECLINED, ApprovalChannel, ApprovalRequest, Decision, ElicitationRequest
from agent_server.errors import ModelError
from agent_server.runtime import AgentRuntime, ClientModel, InputRequest, Park, ParkedApprovals
from agent_server.server.approval_channel import (
    answer_of,
    approval_form,
    decision_of,
    declares_form_elicitation,
    elicitation_form,
)
from agent_server.server.client_model import client_model

WireRequest = types.ElicitRequest | types.CreateMessageRequest


@dataclass(frozen=True)
class Lent:
    """What a 2026-07-28 request lends a background turn through its park (capabilities from the request)."""

    park: Park
    approvals: ApprovalChannel | None
    """Approvals asked through the park when the request declared form elicitation; else headless."""
    client_model: ClientModel | None
    """The client's model through the park when none is configured (why not, without `sampling`)."""

    @property
    def anything(self) -> bool:
        """Whether the turn may ever wait in the park."""
        lends_model = self.client_model is not None and self.client_model.requester is not None
        return self.approvals is not None or lends_model


def lend(runtime: AgentRuntime, ctx: Any, channel: str) -> Lent:
    """A park for a turn of this request, with what the request's client can answer through it."""
    park = runtime.new_park()
    approvals = ParkedApprovals(park, channel) if declares_form_elicitation(ctx) else None
    model = None if runtime.has_model else client_model(ctx, park)
    return Lent(park=park, approvals=approvals, client_model=model)


def wire_requests(park: Park) -> dict[str, WireRequest]:
    """The park's pending requests as the `inputRequests` map."""
    return {request.key: wire_request(request) for request in park.pending()}


def wire_requests_json(park: Park) -> dict[str, Any]:
    return {
        key: request.model_dump(mode="json", by_alias=True, exclude_none=True)
        for key, request in wire_requests(park).items()
    }


def wire_request(request: InputRequest) -> WireRequest:
    """One input request as the MCP request a client answers (`elicitation/create`, `sampling/createMessage`)."""
    payload = request.payload
    if isinstance(payload, ApprovalRequest):
        return approval_form(payload)
    if isinstance(payload, ElicitationRequest):
        return elicitation_form(payload)
    assert isinstance(payload, types.CreateMessageRequestParams), f"unexpected input payload {type(payload)}"
    return types.CreateMessageRequest(params=payload)


def deliver(park: Park, responses: Mapping[str, Any]) -> int:
    """Hand each of `responses` to the request waiting on its key; how many reached one."""
    waiting = {request.key: request for request in park.pending()}
    delivered = 0
    for key, response in responses.items():
        request = waiting.get(key)
        if request is not None and park.answer(key, _answer(request, response)):
            delivered += 1
    return delivered


def _answer(request: InputRequest, response: Any) -> object:
    raw = response.model_dump(mode="json", by_alias=True) if isinstance(response, BaseModel) else response
    if request.kind == "model":
        try:
            return types.CreateMessageResultWithTools.model_validate(raw)
        except ValidationError as exc:
            return ModelError(f"the client's answer to {request.key} is not a sampling result: {_first(exc)}")
    try:
        result = types.ElicitResult.model_validate(raw)
    except ValidationError as exc:
        if request.kind == "approval":
            return Decision("deny", f"the client's answer is not an elicitation result: {_first(exc)}")
        return DECLINED
    return decision_of(result) if request.kind == "approval" else answer_of(result)


def _first(exc: ValidationError) -> str:
    error = exc.errors()[0]
    return f"{'.'.join(str(p) for p in error['loc']) or 'result'}: {error['msg']}"
