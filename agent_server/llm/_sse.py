"""Server-sent events: the `data` payloads of a `text/event-stream` body, one per event.

Only what Chat Completions streaming needs: `data:` lines (several are joined with a newline),
comment lines and the other fields (`event:`, `id:`, `retry:`) ignored, an event dispatched at a
blank line. An event still pending when the body ends is dispatched too (lenient: a server that
omits the last blank line after `data: [DONE]` is not treated as truncated).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable


async def iter_sse_data(lines: AsyncIterable[str]) -> AsyncGenerator[str, None]:
    """Yield the data of each event in `lines` (the body split into lines, terminators removed)."""
    pending: list[str] = []
    async for line in lines:
        if not line:
            if pending:
                yield "\n".join(pending)
                pending = []
            continue
        field, _, value = line.partition(":")
        if field == "data":
            pending.append(value.removeprefix(" "))
    if pending:
        yield "\n".join(pending)
