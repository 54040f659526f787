"""Line assembly of a mounted stdio server's output: split anywhere, bounded per line."""

from __future__ import annotations

import pytest

from agent_server.lines import LineAssembler, LineTooLong


def test_lines_split_across_and_within_chunks_come_out_whole() -> None:
    assembler = LineAssembler(max_line_bytes=100)
    assert assembler.feed(b'{"a":') == []
    assert assembler.feed(b'1}\n{"b":2}\n{"c"') == [b'{"a":1}', b'{"b":2}']
    assert assembler.feed(b":3}") == []
    assert assembler.feed(b"\n\n") == [b'{"c":3}', b""]


def test_a_line_at_the_limit_passes_one_byte_more_fails_before_it_is_held_whole() -> None:
    assembler = LineAssembler(max_line_bytes=10)
    assert assembler.feed(b"0123456789\n") == [b"0123456789"]
    assert assembler.feed(b"01234") == []
    with pytest.raises(LineTooLong, match="longer than 10 bytes"):
        assembler.feed(b"567890")  # no newline in sight: fails now, not when the line ends


def test_a_long_line_in_many_chunks_is_assembled_exactly() -> None:
    assembler = LineAssembler(max_line_bytes=1 << 20)
    chunk = bytes(range(32, 127)) * 100
    pieces = [assembler.feed(chunk) for _ in range(100)]
    assert pieces == [[]] * 100
    assert assembler.feed(b"end\n") == [chunk * 100 + b"end"]


def test_the_lines_before_a_long_one_in_the_same_chunk_are_kept_on_the_error() -> None:
    assembler = LineAssembler(max_line_bytes=10, writer="the client")
    with pytest.raises(LineTooLong, match="the client wrote a line longer than 10 bytes") as raised:
        assembler.feed(b"one\ntwo\n" + b"x" * 11)
    assert raised.value.complete == [b"one", b"two"]
