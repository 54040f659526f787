from __future__ import annotations

from typing import Any

import anyio
import pytest

from agent_server.agent.compaction import (
    FALLBACK_LIST_MAX_CHARS,
    SUMMARY_PREFIX,
    fallback_summary,
    should_compact,
    split_for_compaction,
    summarize,
    summary_message,
)
from agent_server.agent.prompts import estimate_message_tokens
from agent_server.llm.scripted import ScriptedLLM
from agent_server.types import Message, StoredMessage, ToolCall


def stored(seq: int, role: str, content: str = "", **fields: Any) -> StoredMessage:
    message = Message.model_validate({"role": role, "content": content, **fields})
    return StoredMessage(seq=seq, turn_id="turn_1", message=message)


def conversation() -> list[StoredMessage]:
    """user, assistant(tool call), tool, assistant, user, assistant(2 tool calls), tool, tool, assistant."""
    call = ToolCall(id="c1", name="read_file", arguments={"path": "notes.md"})
    calls = [ToolCall(id="c2", name="list_dir"), ToolCall(id="c3", name="search_text", arguments={"pattern": "x"})]
    return [
        stored(1, "user", "What is in notes.md?"),
        stored(2, "assistant", "Reading it.", tool_calls=[call]),
        stored(3, "tool", "remember the milk", tool_call_id="c1", name="read_file"),
        stored(4, "assistant", "It says: remember the milk."),
        stored(5, "user", "List the workspace and search for x."),
        stored(6, "assistant", "", tool_calls=calls),
        stored(7, "tool", "a.txt b.txt", tool_call_id="c2", name="list_dir"),
        stored(8, "tool", "a.txt:1: x", tool_call_id="c3", name="search_text"),
        stored(9, "assistant", "Two files; x is in a.txt."),
    ]


def seqs(messages: list[StoredMessage]) -> list[int]:
    return [m.seq for m in messages]


@pytest.mark.parametrize(
    ("used", "expected"),
    [((100, 500, 100), False), ((100, 600, 100), False), ((100, 601, 100), True)],
)
def test_should_compact_when_the_estimate_exceeds_the_threshold(used: tuple[int, int, int], expected: bool) -> None:
    system, history, tools = used
    assert (
        should_compact(
            system_tokens=system, history_tokens=history, tool_tokens=tools, context_window=1000, threshold=0.8
        )
        is expected
    )


@pytest.mark.parametrize(
    ("keep_last", "compacted", "preserved"),
    [
        (0, [1, 2, 3, 4, 5, 6, 7, 8, 9], []),
        (1, [1, 2, 3, 4, 5, 6, 7, 8], [9]),
        (2, [1, 2, 3, 4, 5], [6, 7, 8, 9]),  # 8 is a tool result: keep its assistant (6) and sibling (7)
        (3, [1, 2, 3, 4, 5], [6, 7, 8, 9]),
        (4, [1, 2, 3, 4, 5], [6, 7, 8, 9]),
        (7, [1], [2, 3, 4, 5, 6, 7, 8, 9]),  # 3 is a tool result: move back to 2
        (9, [], [1, 2, 3, 4, 5, 6, 7, 8, 9]),
        (50, [], [1, 2, 3, 4, 5, 6, 7, 8, 9]),
    ],
)
def test_split_never_starts_the_preserved_part_with_a_tool_result(
    keep_last: int, compacted: list[int], preserved: list[int]
) -> None:
    to_compact, kept = split_for_compaction(conversation(), keep_last)
    assert (seqs(to_compact), seqs(kept)) == (compacted, preserved)
    assert not kept or kept[0].message.role != "tool"


def test_split_of_an_empty_history_is_empty() -> None:
    assert split_for_compaction([], 8) == ([], [])


def test_summary_message_is_a_user_message_with_the_prefix() -> None:
    message = summary_message("We fixed the bug.")
    assert message.role == "user"
    assert message.text().startswith("Summary of the earlier conversation (compacted):")
    assert message.text().endswith("We fixed the bug.")


@pytest.mark.anyio
async def test_llm_summary_gets_the_previous_summary_transcript_and_instructions() -> None:
    to_compact, preserved = split_for_compaction(conversation(), 4)
    llm = ScriptedLLM(
        [
            {
                "expect_contains": [
                    "The user is called Ada.",
                    "Keep every file name.",
                    "user: What is in notes.md?",
                    'read_file({"path": "notes.md"})',
                    "tool read_file: remember the milk",
                ],
                "content": "  Ada asked about notes.md (remember the milk) and listed the workspace.  ",
            }
        ]
    )

    with anyio.fail_after(5):
        record = await summarize(
            llm,
            to_compact=to_compact,
            preserved=preserved,
            previous_summary="The user is called Ada.",
            reason="manual",
            instructions="Keep every file name.",
            model="small-model",
        )

    assert record.mode == "llm"
    assert record.error is None
    assert record.summary == "Ada asked about notes.md (remember the milk) and listed the workspace."
    assert (record.compacted_message_count, record.preserved_message_count) == (5, 4)
    assert record.reason == "manual"
    assert not record.dry_run
    (request,) = llm.calls
    assert request.purpose == "compaction"
    assert request.tools == []
    assert request.model == "small-model"
    assert [m.role for m in request.messages] == ["system", "user"]
    # The transcript holds only what is compacted.
    assert "Two files; x is in a.txt." not in request.messages[1].text()


@pytest.mark.anyio
async def test_token_estimates_cover_summary_and_messages_before_and_after() -> None:
    to_compact, preserved = split_for_compaction(conversation(), 4)
    llm = ScriptedLLM([{"content": "short"}])

    record = await summarize(
        llm, to_compact=to_compact, preserved=preserved, previous_summary="old", reason="token-pressure", dry_run=True
    )

    everything = [summary_message("old"), *(m.message for m in to_compact + preserved)]
    after = [summary_message("short"), *(m.message for m in preserved)]
    assert record.estimated_tokens_before == estimate_message_tokens(everything)
    assert record.estimated_tokens_after == estimate_message_tokens(after)
    assert record.estimated_tokens_after < record.estimated_tokens_before
    assert record.dry_run


@pytest.mark.anyio
async def test_long_messages_are_truncated_in_the_transcript() -> None:
    messages = [stored(1, "user", "start " + "x" * 10_000 + " end-marker")]
    llm = ScriptedLLM([{"content": "ok"}])

    await summarize(llm, to_compact=messages, preserved=[], previous_summary=None, reason="manual")

    sent = llm.calls[0].messages[1].text()
    assert "start" in sent
    assert "end-marker" not in sent
    assert "more characters]" in sent
    assert len(sent) < 5_000


@pytest.mark.anyio
async def test_model_error_falls_back_to_a_deterministic_summary() -> None:
    to_compact, preserved = split_for_compaction(conversation(), 4)
    llm = ScriptedLLM([{"error": {"message": "provider down"}}])

    record = await summarize(
        llm, to_compact=to_compact, preserved=preserved, previous_summary="The user is Ada.", reason="manual"
    )

    assert record.mode == "fallback"
    assert record.error == "provider down"
    assert record.summary.startswith("The user is Ada.")
    assert "- user: What is in notes.md?" in record.summary
    assert "- assistant: Reading it. [called read_file]" in record.summary
    assert "- tool read_file: remember the milk" in record.summary
    assert record.compacted_message_count == 5


@pytest.mark.anyio
async def test_empty_model_answer_falls_back() -> None:
    llm = ScriptedLLM([{"content": "   "}])
    record = await summarize(llm, to_compact=conversation()[:2], preserved=[], previous_summary=None, reason="manual")
    assert record.mode == "fallback"
    assert record.error is not None and "empty" in record.error
    assert "What is in notes.md?" in record.summary


@pytest.mark.anyio
async def test_cancellation_propagates_instead_of_falling_back() -> None:
    llm = ScriptedLLM([{"delay_s": 60, "content": "never"}])
    with anyio.fail_after(5), anyio.move_on_after(0.01) as scope:
        await summarize(llm, to_compact=conversation(), preserved=[], previous_summary=None, reason="manual")
        pytest.fail("summarize returned despite cancellation")
    assert scope.cancelled_caught


def test_fallback_summary_is_bounded() -> None:
    many = [stored(i, "user", f"message {i} " + "y" * 500) for i in range(200)]

    summary = fallback_summary(many, "p" * 20_000)

    assert "[earlier summary truncated]" in summary
    assert summary.count("- user: message") < 200
    assert "more messages" in summary
    assert len(summary) < 8_000 + FALLBACK_LIST_MAX_CHARS + 500


def test_fallback_summary_without_anything_is_still_a_summary() -> None:
    assert fallback_summary([], None)
    assert not fallback_summary([], None).startswith(SUMMARY_PREFIX)


def test_an_oversized_recent_tool_result_is_folded_with_its_request_not_kept_whole() -> None:
    messages = conversation()
    big = messages[6].message.model_copy(update={"content": "z" * 40_000})  # ~10,000 tokens
    messages[6] = messages[6].model_copy(update={"message": big})
    to_compact, preserved = split_for_compaction(messages, 8, keep_tokens=2_000)
    assert [m.seq for m in preserved] == [9]  # the assistant(2 calls) and both results went to the summary
    assert [m.seq for m in to_compact] == list(range(1, 9))
    assert estimate_message_tokens([m.message for m in preserved]) <= 2_000


def test_the_token_budget_changes_nothing_when_the_kept_messages_fit() -> None:
    messages = conversation()
    assert split_for_compaction(messages, 4, keep_tokens=10_000) == split_for_compaction(messages, 4)
