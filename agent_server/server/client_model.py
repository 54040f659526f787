"""The client's own model for one MCP request (`sampling/createMessage`), or why it cannot be lent."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp.shared.message import ServerMessageMetadata

from agent_server.errors import ModelError
from agent_server.runtime import CONFIGURE, ClientModel

if TYPE_CHECKING:
    from agent_server.runtime import Park

NO_BACK_CHANNEL = (
    "this call cannot lend the client's model: protocol 2026-07-28 has no server-to-client requests, "
    "and only run_turn reaches the client's model there (through InputRequiredResult rounds); "
)
NO_SAMPLING = "the client did not declare the MCP sampling capability, so its model cannot be used; "


def client_model(ctx: ServerRequestContext[Any, Any], park: Park | None = None) -> ClientModel:
    """What the client of this request can lend: its model through sampling, or why not.

    On a connection without server-to-client requests (2026-07-28) the model is reachable only through
    `park` (each call an `llm-<n>` input request, `ParkedSampling`), when one is given."""
    caps = ctx.session.client_capabilities
    if caps is None or caps.sampling is None:
        return ClientModel(unavailable=NO_SAMPLING + CONFIGURE)
    with_tools = caps.sampling.tools is not None
    if park is not None:
        return ClientModel(requester=ParkedSampling(park), with_tools=with_tools)
    if not ctx.session.can_send_request:
        return ClientModel(unavailable=NO_BACK_CHANNEL + CONFIGURE)
    return ClientModel(requester=_SessionRequester(ctx), with_tools=with_tools)


class _SessionRequester:
    def __init__(self, ctx: ServerRequestContext[Any, Any]) -> None:
        self._ctx = ctx

    async def create_message(self, params: types.CreateMessageRequestParams) -> types.CreateMessageResultWithTools:
        request = types.CreateMessageRequest(params=params)
        related = None if self._ctx.request_id is None else str(self._ctx.request_id)
        try:
            return await self._ctx.session.send_request(
                request,
                types.CreateMessageResultWithTools,
                metadata=ServerMessageMetadata(related_request_id=related),
            )
        except MCPError as exc:
            raise ModelError(f"the client's model failed: {exc.message}") from exc


class ParkedSampling:
    """A `SamplingRequester` over a turn's park: each model call waits there as `llm-<n>` for the client."""

    def __init__(self, park: Park) -> None:
        self._park = park

    async def create_message(self, params: types.CreateMessageRequestParams) -> types.CreateMessageResultWithTools:
        from agent_server.runtime import InputRequest  # the park machinery loads when a turn first parks

        answer = await self._park.ask(InputRequest(self._park.next_key("llm"), "model", params))
        if isinstance(answer, types.CreateMessageResultWithTools):
            return answer
        if isinstance(answer, ModelError):
            raise answer
        raise ModelError("the client's answer to a model call was not a sampling result")
