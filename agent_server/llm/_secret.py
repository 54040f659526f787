"""The API key as a value that never shows itself, and the masking of it in text we pass on.

Masking happens on whole texts before anything is cut (a cut through the key would otherwise keep
most of it), and across pieces of a text that arrives in chunks: `StreamMask` holds back the end
of a chunk that could begin the key until the next chunk settles it, and `mask_fragments` masks a
piece of the key at either edge of a text quoted on its own (one stream chunk of several).
"""

from __future__ import annotations

from agent_server.redaction import MASK

FRAGMENT_MIN_CHARS = 6
"""A piece of the key this long at the edge of a quoted chunk is masked (shorter ones say nothing)."""


class Secret:
    """The API key: `repr`/`str` never show it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "'***'"

    __str__ = __repr__

    def mask(self, text: str) -> str:
        """`text` with every whole occurrence of the key masked."""
        return text.replace(self._value, MASK)

    def mask_fragments(self, text: str) -> str:
        """`mask`, and a start of the key at the end of `text` or an end of it at the start masked too."""
        text = self.mask(text)
        key = self._value
        tail = _key_prefix_at_end(text, key)
        if tail >= FRAGMENT_MIN_CHARS:
            text = text[:-tail] + MASK
        for size in range(min(len(text), len(key) - 1), FRAGMENT_MIN_CHARS - 1, -1):
            if text.startswith(key[-size:]):
                return MASK + text[size:]
        return text


class StreamMask:
    """Masks the key in text that arrives in deltas, also when the key is split across them."""

    def __init__(self, secret: Secret | None) -> None:
        self._secret = secret
        self._held = ""

    def feed(self, delta: str) -> str:
        """The part of the text so far that is safe to pass on."""
        if self._secret is None:
            return delta
        text = self._secret.mask(self._held + delta)
        keep = _key_prefix_at_end(text, self._secret.reveal())
        self._held = text[len(text) - keep :]
        return text[: len(text) - keep]

    def flush(self) -> str:
        """What was held back: at the end of the text it cannot be the start of a key any more."""
        held, self._held = self._held, ""
        return held


def _key_prefix_at_end(text: str, key: str) -> int:
    """The length of the longest proper start of `key` that `text` ends with (0 if none)."""
    for size in range(min(len(text), len(key) - 1), 0, -1):
        if text.endswith(key[:size]):
            return size
    return 0
