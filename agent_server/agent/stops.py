"""What the loop makes of why the model stopped (`ModelResponse.stop_reason`, one vocabulary for every provider).

An answer cut at the output token limit (`max_tokens`) is not a complete one: the turn ends `truncated`, with
the cut text as `final_text` and an error saying so, never silently `completed`. A tool call cut there has
arguments that do not parse because they end early: the model is told that, not that it wrote invalid JSON,
so that it can make the call again with less. A call that did arrive whole before the cut runs as usual.
"""

from __future__ import annotations

from agent_server.errors import MAX_TOKENS
from agent_server.llm.base import ModelResponse
from agent_server.types import ErrorInfo

CUT_ARGUMENTS = (
    "your output was cut at the token limit while writing the arguments of this call, so they are incomplete; "
    "make the call again with shorter arguments (write a long text in several smaller parts)"
)
CUT_ANSWER = (
    "the model's answer was cut at its output token limit, so final_text is incomplete; raise the provider's "
    "max_tokens setting, or ask the model to continue in the next turn"
)


def explain_cut_calls(response: ModelResponse) -> ModelResponse:
    """`response` with each tool call whose arguments were cut at the token limit saying so."""
    if response.stop_reason != "max_tokens" or not any(c.arguments_error for c in response.tool_calls):
        return response
    calls = [
        call.model_copy(update={"arguments": {}, "arguments_error": CUT_ARGUMENTS}) if call.arguments_error else call
        for call in response.tool_calls
    ]
    return response.model_copy(update={"tool_calls": calls})


def cut_answer(response: ModelResponse) -> ErrorInfo | None:
    """Why a final answer is incomplete, or None when it is whole."""
    if response.stop_reason == "max_tokens":
        return ErrorInfo(type=MAX_TOKENS, message=CUT_ANSWER)
    return None
