"""Splitting a JSON-RPC stream into lines (a mounted server's stdout, the client's stdin): linear in the bytes
read, bounded per line.

Each chunk is scanned once for newlines and appended once to the pending line, so a long line costs
what it weighs (re-joining the pending text with every chunk would be quadratic). A line longer than
`max_line_bytes` is never held whole: `LineTooLong` is raised as soon as the pending part exceeds it.
"""

from __future__ import annotations

MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest JSON-RPC line (one message) either side of a stdio wire may send: a mounted server's stdout,
the client's stdin. Longer ends that connection."""


class LineTooLong(Exception):
    """A line exceeded the limit; the connection cannot resynchronise and must end."""

    def __init__(self, limit: int, writer: str = "the server") -> None:
        super().__init__(f"{writer} wrote a line longer than {limit} bytes (the limit of one message)")
        self.limit = limit
        self.complete: list[bytes] = []
        """The lines that ended before the long one in the same chunk (still whole messages)."""


class LineAssembler:
    """Feed it chunks; it returns the complete lines (without their newline) found so far."""

    def __init__(self, max_line_bytes: int, *, writer: str = "the server") -> None:
        self._max = max_line_bytes
        self._writer = writer
        self._pending = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines completed by `chunk`. Raises `LineTooLong` once a line passes the limit."""
        lines: list[bytes] = []
        start = 0
        try:
            while (end := chunk.find(b"\n", start)) != -1:
                self._append(chunk, start, end)
                lines.append(bytes(self._pending))
                self._pending.clear()
                start = end + 1
            self._append(chunk, start, len(chunk))
        except LineTooLong as exc:
            exc.complete = lines
            raise
        return lines

    def rest(self) -> bytes:
        """The pending part of a line that has not ended (at the end of the stream), and forget it."""
        rest = bytes(self._pending)
        self._pending.clear()
        return rest

    def _append(self, chunk: bytes, start: int, end: int) -> None:
        if len(self._pending) + (end - start) > self._max:
            raise LineTooLong(self._max, self._writer)
        self._pending += memoryview(chunk)[start:end]
