"""Tool results fitted to the model's window: the budget and the cut."""

from __future__ import annotations

from agent_server.agent.window import MIN_RESULT_CHARS, fit_result, result_budget
from agent_server.settings import Settings
from agent_server.types import ImagePart, TextPart, ToolResult


def test_one_rounds_results_share_the_configured_part_of_the_window() -> None:
    settings = Settings(context_window=4096, tool_result_max_share=0.25)
    assert result_budget(settings, 1) == 4096
    assert result_budget(settings, 2) == 2048
    assert result_budget(settings, 100) == MIN_RESULT_CHARS


def test_a_long_result_loses_the_end_of_its_longest_part_and_keeps_a_short_note() -> None:
    result = ToolResult(
        call_id="c",
        name="t",
        content=[
            TextPart(text="a" * 10_000),
            TextPart(text="[the tool's own note]"),
            ImagePart(data="x", mime_type="image/png"),
        ],
    )
    out = fit_result(result, 2_000)
    body, own_note, image, note = out.content
    assert isinstance(body, TextPart) and len(body.text) + len("[the tool's own note]") == 2_000
    assert own_note == TextPart(text="[the tool's own note]") and isinstance(image, ImagePart)
    assert isinstance(note, TextPart) and "10021 characters of text, cut to 2000" in note.text


def test_a_result_within_the_budget_is_the_same_object() -> None:
    result = ToolResult(call_id="c", name="t", content=[TextPart(text="short")])
    assert fit_result(result, 2_000) is result


def test_structured_only_results_are_cut_as_the_json_the_model_reads() -> None:
    result = ToolResult(call_id="c", name="t", structured={"rows": list(range(5_000))})
    out = fit_result(result, 1_000)
    assert out.structured == result.structured  # the record keeps what the tool said
    text = out.text()
    assert text.startswith('{"rows": [0, 1, 2') and "cut to 1000" in text
