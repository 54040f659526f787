"""Leaf module: agent-server's name and version, as every front door and the mounts' client info report them."""

from __future__ import annotations

from functools import cache
from importlib import metadata

NAME = "agent-server"
UNKNOWN = "0.0.0"
"""The version of a copy that is not installed (run from a source tree without its metadata)."""


@cache
def version() -> str:
    """The installed package's version, or `UNKNOWN`."""
    try:
        return metadata.version(NAME)
    except metadata.PackageNotFoundError:
        return UNKNOWN
