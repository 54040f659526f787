"""Builders for turn records, messages and compactions used by the store tests."""

from __future__ import annotations

from agent_server.store.base import SessionStore
from agent_server.types import CompactionRecord, Message, Transition, TurnRecord, new_id, utc_now


def running(session_id: str, turn_id: str | None = None, prompt: str = "hello") -> TurnRecord:
    return TurnRecord(
        turn_id=turn_id or new_id("turn"),
        session_id=session_id,
        trace_id=new_id("trace"),
        status="running",
        prompt=prompt,
        started_at=utc_now(),
    )


def completed(record: TurnRecord, text: str = "done") -> TurnRecord:
    return record.model_copy(
        update={
            "status": "completed",
            "final_text": text,
            "finished_at": utc_now(),
            "transitions": [Transition.model_validate({"from": "sampling", "to": "done", "reason": "final answer"})],
        }
    )


def exchange(prompt: str, answer: str) -> list[Message]:
    return [Message(role="user", content=prompt), Message(role="assistant", content=answer)]


async def run_turn(store: SessionStore, session_id: str, prompt: str = "q") -> TurnRecord:
    """Begin and finish a turn that adds a user and an assistant message."""
    record = running(session_id, prompt=prompt)
    await store.begin_turn(record)
    done = completed(record, text=f"answer to {prompt}")
    assert await store.finish_turn(done, exchange(prompt, f"answer to {prompt}"))
    return done


def compaction(summary: str, *, dry_run: bool = False) -> CompactionRecord:
    return CompactionRecord(
        summary=summary,
        mode="llm",
        compacted_message_count=2,
        preserved_message_count=2,
        estimated_tokens_before=100,
        estimated_tokens_after=40,
        reason="test",
        created_at=utc_now(),
        dry_run=dry_run,
    )


async def texts(store: SessionStore, session_id: str) -> list[str]:
    return [m.message.text() for m in (await store.load_history(session_id)).messages]
