"""A turn record as results carry it (DESIGN 3.4.1), from one field list: the summary or the full record.

The summary's size does not grow with the tools' results: it is every field of `TurnRecord` except those
`FULL_ONLY` names, with `tool_rounds` replaced by one line per inner call (`tool_calls`), and the counts
`model_calls` and `approval_count`. Detail `full` adds the `FULL_ONLY` fields. `TurnView` is the model of both,
built from `TurnRecord`'s own fields, so a field added to the record reaches every door's results (MCP's
`structuredContent` and its outputSchema, ACP's `_meta.agent_server.turn` and `data.turn`, in the summary)
without an edit here; only a field that must stay out of the summary is named, in `FULL_ONLY`.
"""

# No `from __future__ import annotations`: the view's annotations are built from the record's, as objects.

import copy
from typing import TYPE_CHECKING, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, create_model

from agent_server.types import TurnRecord, one_line

Detail = Literal["summary", "full"]
DETAIL_HELP = (
    "`summary` (default): ids, status, final_text, error, usage and one line per inner tool call; "
    "`full`: also every model answer, tool round (with the tools' whole results) and state transition."
)
FULL_ONLY: dict[str, str] = {
    "prompt": "The user's prompt",
    "trace": "The trace mode",
    "assistant_turns": "Every model answer",
    "tool_rounds": "Every tool round, with the whole results",
    "transitions": "The loop's state transitions",
    "approvals": "Each call the approval gate settled, and how",
}
"""The record's fields that only detail `full` carries (each grows with the turn, or repeats the request)."""
TOOL_ERROR_LINE_CHARS = 200
"""A failed inner call's error, as one line of a summary."""


class _View(BaseModel):
    model_config = ConfigDict(defer_build=True)


class ToolCallLine(_View):
    """One inner tool call in a turn summary; its result stays in the turn's full record."""

    round: int
    name: str
    is_error: bool
    duration_s: float
    error: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The first line of a failed call's error."""


class _Derived(_View):
    """What the view adds to the record's fields."""

    model_calls: int
    """Model answers the turn received."""
    tool_calls: list[ToolCallLine]
    approval_count: int = 0
    """Tool calls the approval gate settled (asked, remembered or refused); `detail: "full"` lists them."""


def _record_fields() -> dict[str, Any]:
    """The record's fields as the view declares them: as they are, or optional and absent unless `full`."""
    fields: dict[str, Any] = {}
    for name, info in TurnRecord.model_fields.items():
        if name in FULL_ONLY:
            described = FULL_ONLY[name] + " (detail `full` only)"
            optional: Any = Optional[info.annotation]  # noqa: UP045 - `X | None` needs a type, not a `TypeForm`
            fields[name] = (optional, Field(default=None, exclude_if=_absent, description=described))
        else:
            fields[name] = (info.annotation, copy.copy(info))
    return fields


def _absent(value: object) -> bool:
    return value is None


if TYPE_CHECKING:
    TurnView = _Derived
else:
    TurnView = create_model(
        "TurnResult",
        __base__=_Derived,
        __doc__="A turn as results carry it (DESIGN 3.4.1): a summary whose size does not grow with the tools' "
        "results, or with detail `full` the whole record.",
        **_record_fields(),
    )


def turn_view(record: TurnRecord, detail: Detail = "summary") -> TurnView:
    """`record` at `detail` (see the module docstring)."""
    lines = [
        ToolCallLine(
            round=tool_round.tool_round,
            name=result.name,
            is_error=result.is_error,
            duration_s=round(result.duration_s, 3),
            error=one_line(result.text(), TOOL_ERROR_LINE_CHARS) if result.is_error else None,
        )
        for tool_round in record.tool_rounds
        for result in tool_round.tool_results
    ]
    view = record.model_dump(exclude=set(FULL_ONLY) if detail == "summary" else None)
    counts = {"model_calls": len(record.assistant_turns), "approval_count": len(record.approvals)}
    return TurnView.model_validate(view | counts | {"tool_calls": lines})


def turn_json(record: TurnRecord, detail: Detail = "summary") -> dict[str, Any]:
    """`turn_view` as JSON, the shape every door sends."""
    return turn_view(record, detail).model_dump(mode="json", by_alias=True)
