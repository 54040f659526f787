"""Leaf module: agent-server's name and version, as every front door and the mounts' client info report them."""

from __future__ import annotations

from functools import cache
from importlib import metadata

NAME = "agent-server"
UNKNOWN = "0.0.0"
"""The version of a copy that is not installed (run from a source tree without its metadata)."""


@cache
def version() -> str:
    """The installed package's version, or `UNKNOWN`.

    Read off the metadata's `Version` header, which comes before the first blank line: `metadata.version` parses
    the whole file with the email parser (the README is in it as the long description: 150 KB and 2-3 ms of the
    server's start, once, `bench/first_turn.py`).
    """
    try:
        dist = metadata.distribution(NAME)
    except metadata.PackageNotFoundError:
        return UNKNOWN
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    for line in text.splitlines():
        if not line:
            break
        name, _, value = line.partition(":")
        if name.strip().lower() == "version":
            return value.strip()
    return dist.version
