"""The one presentation of a call for approval questions (escaped, whole or saying it is cut) and the bound on
arguments kept in records (cut longest first, with markers)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_server.presentation import CUT_MARKER, cap_arguments, escape, escape_char, json_size, present_call

HARMLESS = "ls -la " + "&& echo checking the build status " * 6
HIDDEN_PAYLOADS = [
    HARMLESS + "; echo PAYLOAD > pwned.txt",  # harmless for the first 200 characters, then the payload
    "ls #" + "\u200b" * 200 + "\necho PAYLOAD > pwned.txt",  # zero-width spaces, then a second line
    "ls #" + " " * 300 + "\recho PAYLOAD > pwned.txt",  # a carriage return that a terminal would rewind
    "echo safe \u202e;txt.dewnp > DAOLYAP ohce",  # a right-to-left override
    "echo hi\x1b[2K\x1b[1Gecho PAYLOAD > pwned.txt",  # terminal escapes that erase the line
    "ls" + "\U000e0020" * 50 + "; echo PAYLOAD > pwned.txt",  # tag characters (invisible)
]


def command(text: str, max_chars: int = 6000) -> Any:
    return present_call("run_command", {"command": text}, builtin=True, max_chars=max_chars)


@pytest.mark.parametrize("payload", HIDDEN_PAYLOADS)
def test_a_command_is_shown_whole_and_nothing_in_it_renders_invisibly(payload: str) -> None:
    shown = command(payload)
    assert not shown.cut
    assert "PAYLOAD" in shown.text or "DAOLYAP" in shown.text
    for char in shown.text:
        assert char == "\n" or " " <= char <= "~", f"{char!r} is shown unescaped"
    assert shown.text.startswith("command:\n")


def test_a_second_line_of_a_command_is_marked_where_a_host_would_fold_it() -> None:
    shown = command("ls #\nrm -rf ~/x")
    assert shown.text == "command:\nls #\\n\nrm -rf ~/x"
    assert " ".join(shown.text.split()) == "command: ls #\\n rm -rf ~/x"  # folded onto one line: still visible


@pytest.mark.parametrize(
    ("char", "shown"),
    [
        ("\u200b", "\\u200b"),  # zero-width space
        ("\u200d", "\\u200d"),  # zero-width joiner
        ("\u2060", "\\u2060"),  # word joiner
        ("\ufeff", "\\ufeff"),  # BOM / zero-width no-break space
        ("\u202e", "\\u202e"),  # right-to-left override
        ("\u2067", "\\u2067"),  # right-to-left isolate
        ("\u200f", "\\u200f"),  # right-to-left mark
        ("\x1b", "\\x1b"),
        ("\x7f", "\\x7f"),
        ("\x85", "\\x85"),  # C1 next line
        ("\u2028", "\\u2028"),  # line separator
        ("\u00a0", "\\xa0"),  # no-break space passing for a space
        ("\u3164", "\\u3164"),  # Hangul filler
        ("\ufe0f", "\\ufe0f"),  # variation selector
        ("\U000e0041", "\\U000e0041"),  # tag character
        ("\t", "\\t"),
        ("\r", "\\r"),
        ("é", None),
        ("中", None),
        ("a", None),
    ],
)
def test_which_characters_are_escaped(char: str, shown: str | None) -> None:
    assert escape_char(char) == shown


def test_escape_stops_within_its_limit_and_says_how_much_it_showed() -> None:
    assert escape("abc\u200bdef", limit=5) == ("abc", 3)  # the escape would not fit: not half shown
    assert escape("abc\u200bdef", limit=9) == ("abc\\u200b", 4)
    assert escape("ab\ncd", newlines=True) == ("ab\ncd", 5)
    assert escape("x" * 10**7, limit=10) == ("x" * 10, 10)


def test_a_call_too_long_to_show_is_cut_and_says_how_much_is_hidden() -> None:
    content = "x" * 200_000
    shown = present_call("write_file", {"path": "big.txt", "content": content}, builtin=True, max_chars=1000)
    assert shown.cut and len(shown.text) <= 1000
    assert shown.text.startswith("path: big.txt\nsize: 200,000 characters\ncontent:\nxxx")
    assert shown.hidden_chars == 200_000 - len(shown.text.split("content:\n")[1])


def test_a_small_write_shows_path_size_and_content() -> None:
    shown = present_call("write_file", {"path": "a.txt", "content": "héllo\nworld\n"}, builtin=True, max_chars=6000)
    assert shown.text == "path: a.txt\nsize: 13 bytes, 2 lines\ncontent:\nhéllo\nworld\n"


def test_an_edit_is_shown_as_a_diff_of_its_texts() -> None:
    arguments = {
        "path": "m.py",
        "old_text": "a = 1\nb = 2\nc = 3",
        "new_text": "a = 1\nb = 20\nc = 3",
        "replace_all": True,
    }
    shown = present_call("edit_file", arguments, builtin=True, max_chars=6000)
    assert shown.text == (
        "path: m.py\nreplace_all: true (every occurrence of old_text)\nchange:\n a = 1\n-b = 2\n+b = 20\n c = 3"
    )


def test_an_edit_shows_lines_that_look_like_diff_headers_and_every_line_break() -> None:
    arguments = {"path": "q.sql", "old_text": "-- keep\nSELECT 1;\n", "new_text": "--- gone\nSELECT 2;\u2028x\r"}
    shown = present_call("edit_file", arguments, builtin=True, max_chars=6000)
    assert shown.text.split("change:\n")[1] == "--- keep\n-SELECT 1;\n-\n+--- gone\n+SELECT 2;\\u2028x\\r"


def test_a_long_edit_is_shown_as_blocks_and_cut() -> None:
    arguments = {"path": "m.py", "old_text": "old\n" * 10, "new_text": "new\n" * 100_000}
    shown = present_call("edit_file", arguments, builtin=True, max_chars=500)
    assert shown.cut and "-old" in shown.text and "+new" in shown.text
    assert shown.hidden_chars > 390_000


def test_a_built_in_call_of_an_unexpected_shape_is_shown_as_json_with_everything() -> None:
    arguments = {"command": "ls", "extra": "rm -rf ~"}  # a key the display by meaning would leave out
    shown = present_call("run_command", arguments, builtin=True, max_chars=6000)
    assert shown.text.startswith("arguments:\n{") and "rm -rf ~" in shown.text


def test_a_mounted_call_is_shown_as_escaped_json_with_secrets_masked() -> None:
    arguments = {"query": "hi\u202e there", "url": "https://user:pw@host/x?token=abc", "note": "key SECRETVALUE"}
    shown = present_call("fs__search", arguments, builtin=False, secrets=["SECRETVALUE"], max_chars=6000)
    assert "\u202e" not in shown.text and "\\u202e" in shown.text
    assert "pw@" not in shown.text and "abc" not in shown.text and "SECRETVALUE" not in shown.text
    assert json.loads(shown.text.removeprefix("arguments:\n").replace("\\u202e", "\u202e"))["query"] == "hi\u202e there"


def test_a_secret_across_the_cut_is_masked_whole() -> None:
    text = "a" * 990 + "SECRETVALUE" + "b" * 100
    shown = present_call("run_command", {"command": text}, builtin=True, secrets=["SECRETVALUE"], max_chars=1000)
    assert shown.cut and "SECR" not in shown.text


def test_cap_arguments_keeps_small_arguments_as_they_are() -> None:
    arguments = {"path": "a.txt", "content": "hi"}
    assert cap_arguments(arguments, 1000) is arguments


def test_cap_arguments_cuts_the_longest_values_first_with_a_marker() -> None:
    arguments = {"path": "a.txt", "content": "x" * 200_000, "note": "short and kept"}
    capped = cap_arguments(arguments, 2000)
    assert capped["path"] == "a.txt" and capped["note"] == "short and kept"
    kept = capped["content"].split("…")[0]
    assert capped["content"] == kept + CUT_MARKER.format(200_000 - len(kept))
    assert json_size(capped) <= 2000 and len(json.dumps(capped)) <= 2000


def test_cap_arguments_bounds_many_items_too() -> None:
    capped = cap_arguments({"items": list(range(100_000)), "names": {f"k{i}": "v" * 50 for i in range(10_000)}}, 4000)
    assert len(json.dumps(capped)) < 8000
    assert capped["items"][-1].startswith("…[cut: ") or any(k.startswith("…[cut: ") for k in capped["names"])
