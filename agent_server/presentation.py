"""Leaf module: how a tool call is shown to a person and kept in a record, faithfully and within bounds.

Two functions, each the one place for its decision (DESIGN 3.10, 5 "Bounds"):

- `present_call`: the text an approval question shows of a call. It is the whole call: a `run_command`'s
  command (with its `cwd` and `timeout_s`), a `write_file`'s path, size and content, an `edit_file`'s path
  and the change as a diff, and any other call's arguments as indented JSON. Nothing is folded onto one
  line and nothing is cut, up to `max_chars` characters of text; past that the text is cut and the
  presentation says how many characters are hidden, so the question can say the call is not shown in
  full (and default to deny). Characters that would render as nothing or rearrange what is shown are
  escaped (`escape`), and secrets are masked (`redact`, applied before anything is cut).
- `cap_arguments`: a call's arguments as a turn record, the history and the events keep them: at most
  about `max_chars` characters of JSON, the longest strings cut first, each cut value ending with a
  marker (`CUT_MARKER`) that says how much was cut and that the call ran with all of it.

Both only look at as much of a long value as they keep, so a 200 MB argument costs what is shown.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from agent_server.redaction import redact

ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
"""Unicode categories shown escaped: controls (ESC, DEL, C1), format characters (zero-width spaces and
joiners, bidirectional marks, embeddings, overrides and isolates, tag characters), surrogates, private
use, unassigned code points, line and paragraph separators, and spaces other than U+0020."""
INVISIBLE = frozenset(
    {0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x2800, 0x3164, 0xFFA0}
    | set(range(0x180B, 0x1810))
    | set(range(0xFE00, 0xFE10))
    | set(range(0xE0100, 0xE01F0))
)
"""Characters of other categories that render as nothing or as blank: the combining grapheme joiner,
Hangul and Khmer fillers, the blank Braille pattern, variation selectors."""
_SPECIAL = re.compile(r"[^ -~]")
"""Anything but printable ASCII: looked at one by one (`escape_char`); runs of the rest are copied as they are."""
_SHORT = {"\t": "\\t", "\r": "\\r", "\n": "\\n"}
CUT_MARKER = "…[cut: {} more characters; the call ran with the whole value]"
"""Ends a string value `cap_arguments` cut."""
_ITEMS_MARKER = "…[cut: {} more items; the call ran with all of them]"
_NEVER_CUT = 80
"""`cap_arguments` keeps strings this short whole (its marker would be longer than what it saves)."""
_REDACT_MARGIN = 4096
"""Redaction looks this much past the part shown, so that a secret or URL across the cut is masked whole."""
_DIFF_MAX_LINES = 400
"""`edit_file`'s change is shown as a unified diff up to this many lines a side (else as -/+ blocks)."""


def escape_char(char: str) -> str | None:
    """`char` as a visible escape (`\\u200b`, `\\x1b`, `\\t`), or None when it is shown as it is."""
    if " " <= char <= "~":
        return None
    if char in _SHORT:
        return _SHORT[char]
    point = ord(char)
    if point not in INVISIBLE and unicodedata.category(char) not in ESCAPED_CATEGORIES:
        return None
    if point < 0x100:
        return f"\\x{point:02x}"
    return f"\\u{point:04x}" if point < 0x10000 else f"\\U{point:08x}"


def escape(text: str, *, newlines: bool = False, limit: int | None = None) -> tuple[str, int]:
    """`text` with every character `escape_char` names escaped, and how many characters of `text` it shows.

    `newlines`: keep line breaks as line breaks (content, diffs, indented JSON); otherwise a line break is
    shown as `\\n` followed by a real line break, so that a command's second line cannot pass for a part
    of its first (`ls #` then a newline then another command) even where a host folds lines. With `limit`,
    the output stops before it would pass `limit` characters.
    """
    cap = sys.maxsize if limit is None else limit
    text = text[:cap]  # each character shows as one or more: no more than `cap` of them can be shown
    out: list[str] = []
    size = pos = 0
    for match in _SPECIAL.finditer(text):
        plain = text[pos : match.start()]
        if size + len(plain) > cap:
            break
        out.append(plain)
        size += len(plain)
        pos = match.start()
        piece = _shown(match.group(), newlines)
        if size + len(piece) > cap:
            return "".join(out), pos
        out.append(piece)
        size += len(piece)
        pos = match.end()
    rest = text[pos : pos + cap - size]
    out.append(rest)
    return "".join(out), pos + len(rest)


def _shown(char: str, newlines: bool) -> str:
    if char == "\n":
        return "\n" if newlines else "\\n\n"
    return escape_char(char) or char


def escaped(text: str) -> str:
    """`text` with every invisible or reordering character escaped, line breaks kept (for short texts)."""
    return escape(text, newlines=True)[0]


@dataclass(frozen=True)
class Presentation:
    """What an approval question shows of one call (see `present_call`)."""

    text: str
    """The call, escaped and masked: all of it, or its first part when `hidden_chars` is not 0."""
    hidden_chars: int = 0
    """How many characters of the call's values are not in `text` (0: the whole call is shown)."""

    @property
    def cut(self) -> bool:
        return self.hidden_chars > 0

    @property
    def lines(self) -> int:
        return self.text.count("\n") + 1


@dataclass(frozen=True)
class _Field:
    label: str
    value: str
    """All of the field's text, or its first part when `more` is not 0."""
    block: bool = False
    """Shown on its own lines under its label (else after it, on the label's line)."""
    newlines: bool = True
    """Line breaks kept as they are (see `escape`)."""
    more: int = 0
    """Characters of the field that are not even in `value` (hidden whatever the budget)."""


def present_call(
    tool: str,
    arguments: dict[str, Any],
    *,
    builtin: bool,
    secrets: Iterable[str] = (),
    max_chars: int,
) -> Presentation:
    """The faithful text of a call of `tool` with `arguments` (see the module docstring).

    `builtin`: the tool is the server's own, so `run_command`, `write_file` and `edit_file` are shown by
    their meaning; any other call (and a built-in call with arguments of another shape) is shown as JSON.
    """
    fields = _builtin_fields(tool, arguments, max_chars) if builtin else None
    if fields is None:
        fields = [_json_field(arguments, max_chars)]
    return _render(fields, tuple(secrets), max_chars)


def _render(fields: list[_Field], secrets: tuple[str, ...], max_chars: int) -> Presentation:
    """The fields, one after the other, within `max_chars` characters in all; what did not fit is counted."""
    parts: list[str] = []
    left = max_chars
    hidden = 0
    margin = _REDACT_MARGIN + max((len(s) for s in secrets), default=0)
    for field in fields:
        head = f"{field.label}:" + ("\n" if field.block else " ")
        window = field.value[: max(left, 0) + margin]
        masked = redact(window, secrets)
        text, shown = escape(masked, newlines=field.newlines, limit=max(left - len(head), 0))
        hidden += field.more + len(field.value) - len(window) + len(masked) - shown
        if text or not field.value:
            parts.append(head + text)
            left -= len(head) + len(text) + 1
    return Presentation(text="\n".join(parts), hidden_chars=hidden)


def _builtin_fields(tool: str, arguments: dict[str, Any], max_chars: int) -> list[_Field] | None:
    """The fields of a built-in call by its meaning; None when its arguments are not of the expected shape."""
    if tool == "run_command" and _shaped(arguments, {"command": str}, {"cwd": str, "timeout_s": float}):
        fields = [_Field("command", arguments["command"], block=True, newlines=False)]
        fields += [_Field(key, str(arguments[key]), newlines=False) for key in ("cwd", "timeout_s") if key in arguments]
        return fields
    if tool == "write_file" and _shaped(arguments, {"path": str, "content": str}, {}):
        content: str = arguments["content"]
        return [
            _Field("path", arguments["path"], newlines=False),
            _Field("size", _size_of(content, max_chars)),
            _Field("content", content, block=True),
        ]
    edit = {"path": str, "old_text": str, "new_text": str}
    if tool == "edit_file" and _shaped(arguments, edit, {"replace_all": bool}):
        fields = [_Field("path", arguments["path"], newlines=False)]
        if arguments.get("replace_all"):
            fields.append(_Field("replace_all", "true (every occurrence of old_text)"))
        fields.append(_change(arguments["old_text"], arguments["new_text"], max_chars))
        return fields
    return None


def _shaped(arguments: dict[str, Any], required: dict[str, type], optional: dict[str, type]) -> bool:
    """Whether `arguments` has all the `required` keys, maybe some `optional` ones, and values of those types."""
    kinds = {**required, **optional}
    if not set(required) <= set(arguments) <= set(kinds):
        return False
    return all(_is(value, kinds[key]) for key, value in arguments.items())


def _is(value: Any, kind: type) -> bool:
    if kind is bool or isinstance(value, bool):
        return kind is bool and isinstance(value, bool)
    if kind is float:
        return isinstance(value, int | float)
    return isinstance(value, kind)


def _size_of(content: str, max_chars: int) -> str:
    if len(content) > max_chars:  # not encoded, nor counted: only what is shown is looked at
        return f"{len(content):,} characters"
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    size = len(content.encode("utf-8", "surrogatepass"))
    return f"{size:,} bytes, {lines:,} line{'' if lines == 1 else 's'}"


def _change(old: str, new: str, max_chars: int) -> _Field:
    """`old` -> `new` as a unified diff of their lines (without its headers), or, when they are long (or the
    same), as a block of `-` lines then one of `+` lines (a diff of long texts is slow, and would be cut)."""
    if len(old) + len(new) <= max_chars:  # only then split: a long text is looked at no further than shown
        # Split at "\n" only: every other line break (`\r`, `\u2028`) stays in its line, to be shown escaped.
        old_lines, new_lines = old.split("\n"), new.split("\n")
        context = max(len(old_lines), len(new_lines))
        if context <= _DIFF_MAX_LINES:
            diff = list(difflib.unified_diff(old_lines, new_lines, n=context, lineterm=""))
            if diff:  # one hunk (all lines are context): drop its `---`, `+++` and `@@` headers
                return _Field("change", "\n".join(diff[3:]), True)
    if len(old) > max_chars:  # only its head can be shown: the + block would not be reached
        return _Field("change", _prefixed("-", old[:max_chars]), True, more=len(old) - max_chars + len(new))
    head = new[:max_chars]
    return _Field("change", _prefixed("-", old) + "\n" + _prefixed("+", head), True, more=len(new) - len(head))


def _prefixed(mark: str, text: str) -> str:
    return "\n".join(mark + line for line in text.split("\n"))


def _json_field(arguments: dict[str, Any], max_chars: int) -> _Field:
    """Any call's arguments as indented JSON, long values cut by `cap_arguments` first (its markers say
    where), and what that cut counted as hidden."""
    capped = cap_arguments(arguments, max_chars)
    text = json.dumps(capped, ensure_ascii=False, indent=2, default=str)
    return _Field("arguments", text, block=True, more=max(json_size(arguments) - json_size(capped), 0))


# --- the record's bound ----------------------------------------------------------------------


def json_size(value: Any, depth: int = 0) -> int:
    """About how many characters `value` takes as compact JSON (strings by their length: cheap)."""
    if isinstance(value, str):
        return len(value) + 2
    if depth > 100:
        return 0
    if isinstance(value, dict):
        items: dict[Any, Any] = value  # pyright: ignore[reportUnknownVariableType]
        return 2 + sum(len(str(k)) + 4 + json_size(v, depth + 1) for k, v in items.items())
    if isinstance(value, list | tuple):
        elements: list[Any] = list(value)  # pyright: ignore[reportUnknownArgumentType]
        return 2 + sum(json_size(v, depth + 1) + 1 for v in elements)
    return len(str(value))


def cap_arguments(arguments: dict[str, Any], max_chars: int) -> dict[str, Any]:
    """`arguments` within about `max_chars` characters of JSON (see the module docstring); the same object
    when it fits. Strings longer than a common length are cut to it (the longest give way first); a list
    or object that still does not fit keeps its first items and a marker saying how many were cut."""
    if json_size(arguments) <= max_chars:
        return arguments
    keep = _string_keep(list(_string_lengths(arguments)), max_chars)
    capped: dict[str, Any] = _capped(arguments, keep, max_chars)[0]
    return capped


def _string_lengths(value: Any, depth: int = 0) -> Iterator[int]:
    if isinstance(value, str):
        yield len(value)
    elif depth <= 100 and isinstance(value, dict | list):
        items: list[Any] = list(value.values() if isinstance(value, dict) else value)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        for item in items:
            yield from _string_lengths(item, depth + 1)


def _string_keep(lengths: list[int], max_chars: int) -> int:
    """The longest a string may stay so that all of them fit in about `max_chars` (cut ones with a marker)."""
    budget = max_chars // 2  # the other half for the structure, short values and the markers
    lengths.sort(reverse=True)
    total = sum(lengths)
    for index, length in enumerate(lengths):  # the longest `index` strings are cut to `keep`
        keep = max((budget - (total - length)) // (index + 1), 0)
        if keep >= length:
            return length
        total -= length
        if index + 1 == len(lengths) or keep >= lengths[index + 1]:
            return keep
    return 0


def _capped(value: Any, keep: int, left: int, depth: int = 0) -> tuple[Any, int]:
    """`value` with strings cut to `keep` and containers cut once `left` characters are spent; what is left."""
    if isinstance(value, str):
        text = value if len(value) <= max(keep, _NEVER_CUT) else value[:keep] + CUT_MARKER.format(len(value) - keep)
        return text, left - len(text) - 2
    if depth > 100 or not isinstance(value, dict | list):
        return value, left - len(str(value))
    if isinstance(value, dict):
        source: dict[Any, Any] = value  # pyright: ignore[reportUnknownVariableType]
        out: dict[str, Any] = {}
        for index, (key, item) in enumerate(source.items()):
            if left <= 0:
                out[_ITEMS_MARKER.format(len(source) - index)] = None
                break
            name = str(key)
            out[name], left = _capped(item, keep, left - len(name) - 4, depth + 1)
        return out, left
    elements: list[Any] = value  # pyright: ignore[reportUnknownVariableType]
    kept: list[Any] = []
    for index, item in enumerate(elements):
        if left <= 0:
            kept.append(_ITEMS_MARKER.format(len(elements) - index))
            break
        item, left = _capped(item, keep, left - 1, depth + 1)
        kept.append(item)
    return kept, left
