"""Leaf module: one turn's options, a single value from a front door's request to the loop.

openai-agents' `RunConfig` is the model: what a caller may choose for a turn (`TurnChoices`: the tool-pass
limit, the timeout, the trace mode, the model, the tool allow-list) is declared once, here, with its bounds and
help; the MCP door's `run_turn` arguments and the ACP door's prompt `_meta` are these fields, and the loop reads
them from the same `TurnOptions` value (`agent.context.TurnRequest.options`). `TurnOptions` adds what the
caller's door lends the turn: the caller's trace id and trace context, its way to ask the user for approvals, and
its own model.
A new choice is one field here and its use in the loop.
"""

# No `from __future__ import annotations`: pydantic would compile the annotation strings at first use.

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, ConfigDict, Field, SkipValidation

from agent_server.approvals import ApprovalChannel
from agent_server.trace_context import TraceContext
from agent_server.types import TraceMode

if TYPE_CHECKING:
    import mcp_types


class SamplingRequester(Protocol):
    async def create_message(
        self, params: "mcp_types.CreateMessageRequestParams"
    ) -> "mcp_types.CreateMessageResultWithTools":
        """Send `sampling/createMessage` to the client.

        Raises:
            ModelError: the client refused or failed the request.
        """
        ...


@dataclass(frozen=True)
class ClientModel:
    """The caller's own model for one call, as its front door can lend it (MCP sampling), or why not."""

    requester: SamplingRequester | None = None
    with_tools: bool = False
    unavailable: str | None = None
    """Why the caller's model cannot be used; ignored when `requester` is given."""


class TurnChoices(BaseModel):
    """What a caller may choose for one turn, on every door (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    max_tool_passes: int | None = Field(default=None, ge=0, le=1000, description="Tool rounds allowed (default 50).")
    timeout_s: float | None = Field(default=None, gt=0, le=86_400, description="Wall-clock limit for the whole turn.")
    trace: TraceMode = Field(default="standard", description="`extended` also records the model's reasoning.")
    model: str | None = Field(default=None, description="Model name override for this turn.")
    tools: list[str] | None = Field(default=None, description="Allow-list of agent tool names or globs.")


class TurnOptions(TurnChoices):
    """One turn's options: the caller's choices and what its door lends the turn."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    trace_id: str | None = None
    """The caller's trace id (e.g. from a request's `traceparent`); default: a new one."""
    approvals: SkipValidation[ApprovalChannel | None] = Field(default=None, exclude=True)
    """How the turn asks its user to approve a tool call (DESIGN 3.7); None: nobody can be asked, and calls
    that need approval follow `approvals.headless`. A background turn outlives its request, so its channel
    must stay reachable (`ParkedApprovals` over the turn's park, or a program's own)."""
    client_model: SkipValidation[ClientModel | None] = Field(default=None, exclude=True)
    """The caller's own model, used when none is configured."""
    trace_context: SkipValidation[TraceContext | None] = Field(default=None, exclude=True)
    """The caller's W3C trace context (a request's `_meta` `traceparent`), which the turn's trace continues;
    without it the turn's span is a child of the span current where the turn runs, if any (README "Traces")."""

    @classmethod
    def of(
        cls,
        choices: TurnChoices,
        *,
        trace_id: str | None = None,
        approvals: ApprovalChannel | None = None,
        client_model: ClientModel | None = None,
        trace_context: TraceContext | None = None,
    ) -> "TurnOptions":
        """`choices` (of a request that holds them among other fields) with what the door lends."""
        chosen = {name: getattr(choices, name) for name in TurnChoices.model_fields}
        lent = cls(trace_id=trace_id, approvals=approvals, client_model=client_model, trace_context=trace_context)
        return lent.model_copy(update=chosen)
