"""Names of mounted tools: `<prefix>__<tool>`, safe for every LLM provider's tool-name rules.

Providers accept `^[A-Za-z0-9_-]{1,64}$`. Any other character becomes `_`; a name longer than
64 characters is cut to 55 and gets `_` and the first 8 hex digits of the SHA-256 of the full
original (unsanitised) name, so two long names that share their first 55 characters still differ.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections.abc import Sequence

SEPARATOR = "__"
MAX_NAME_LENGTH = 64
_HASH_DIGITS = 8
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def sanitize(text: str) -> str:
    """`text` with every character outside `[A-Za-z0-9_-]` replaced by `_`."""
    return _UNSAFE.sub("_", text)


def mounted_tool_name(prefix: str, tool: str) -> str:
    """The agent-side name of `tool` of the server mounted under `prefix`."""
    original = f"{prefix}{SEPARATOR}{tool}"
    name = sanitize(original)
    if len(name) <= MAX_NAME_LENGTH:
        return name
    digest = hashlib.sha256(original.encode("utf-8")).hexdigest()[:_HASH_DIGITS]
    return f"{name[: MAX_NAME_LENGTH - _HASH_DIGITS - 1]}_{digest}"


def tool_selected(tool: str, include: Sequence[str] | None, exclude: Sequence[str]) -> bool:
    """Whether a server's tool passes the `include` (None: all) and `exclude` fnmatch globs."""
    if include is not None and not any(fnmatch.fnmatchcase(tool, pattern) for pattern in include):
        return False
    return not any(fnmatch.fnmatchcase(tool, pattern) for pattern in exclude)
