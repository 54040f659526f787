"""Mounted tool names: `<prefix>__<tool>`, `[A-Za-z0-9_-]`, at most 64 characters; include/exclude globs."""

from __future__ import annotations

import hashlib
import re

from agent_server.mounts.naming import MAX_NAME_LENGTH, mounted_tool_name, sanitize, tool_selected


def test_plain_names_are_joined() -> None:
    assert mounted_tool_name("fs", "read_file") == "fs__read_file"
    assert mounted_tool_name("every", "get-sum") == "every__get-sum"


def test_other_characters_become_underscores() -> None:
    assert sanitize("a.b c/d:é") == "a_b_c_d__"
    assert mounted_tool_name("my server", "tools.list") == "my_server__tools_list"


def test_long_names_are_cut_with_a_hash_of_the_original() -> None:
    tool = "x" * 80
    name = mounted_tool_name("server", tool)
    assert len(name) == MAX_NAME_LENGTH
    digest = hashlib.sha256(f"server__{tool}".encode()).hexdigest()[:8]
    assert name == f"server__{'x' * 47}_{digest}"
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name)
    # two names sharing the first 55 characters still differ
    assert mounted_tool_name("server", tool + "a") != mounted_tool_name("server", tool + "b")
    # exactly 64 is kept as is
    exact = "y" * (MAX_NAME_LENGTH - len("s__"))
    assert mounted_tool_name("s", exact) == f"s__{exact}"


def test_hash_is_of_the_unsanitised_name() -> None:
    a = mounted_tool_name("s", "é" * 70)
    b = mounted_tool_name("s", "ü" * 70)
    assert a != b and len(a) == len(b) == MAX_NAME_LENGTH


def test_include_and_exclude() -> None:
    assert tool_selected("read_file", None, [])
    assert tool_selected("read_file", ["read_*"], [])
    assert not tool_selected("write_file", ["read_*"], [])
    assert not tool_selected("read_secret", ["read_*"], ["*secret*"])
    assert not tool_selected("Read_file", ["read_*"], [])  # case-sensitive
    assert not tool_selected("anything", [], [])  # an empty include offers nothing
