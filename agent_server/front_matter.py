"""YAML front matter of Markdown files users already keep: Agent Skills' `SKILL.md` and named agents' `NAME.md`.

One parser for both: the text between a first `---` line and the next, read by PyYAML's safe loader (libyaml's
when the wheel has it), after a nesting check, since PyYAML's constructor recurses in Python and a file is
anyone's (8 KiB of `[` would cost seconds of a worker thread and the interpreter's stack).
"""

from __future__ import annotations

from typing import Any, cast

NESTING_MAX = 16
INDENT_MAX = 64
_FENCE = "---"


class FrontMatterError(ValueError):
    """A file whose front matter is missing, malformed or breaks the standard's rules."""


def split_front_matter(
    text: str, *, file: str = "the file", head_bytes: int | None = None
) -> tuple[dict[str, Any], str]:
    """The front matter (parsed) and the body of a file's text (`file` names it in errors); `head_bytes`: `text`
    is only the file's first bytes, so the body may be cut.

    Raises:
        FrontMatterError: there is none, it is not closed, or it is not a YAML mapping.
    """
    import yaml  # only once such a file is found: keeps the start path light

    lines = text.removeprefix("\ufeff").split("\n")
    if lines[0].rstrip("\r") != _FENCE:
        raise FrontMatterError(f"{file} does not begin with a front matter line '---'")
    end = next((i for i, line in enumerate(lines[1:], start=1) if line.rstrip("\r") == _FENCE), None)
    if end is None:
        where = "" if head_bytes is None else f" within its first {head_bytes} bytes"
        raise FrontMatterError(f"the front matter is not closed by a '---' line{where}")
    front = "\n".join(lines[1:end])
    _check_nesting(front)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when the wheel has it
    try:
        meta: object = yaml.load(front, Loader=loader)  # a safe loader, either way
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise FrontMatterError(f"the front matter is not valid YAML: {problem}{line}") from None
    except RecursionError:  # nesting deeper than the interpreter's stack (`[[[[...`)
        raise FrontMatterError("the front matter is not valid YAML: it is nested too deeply") from None
    except (ValueError, TypeError) as exc:  # a value PyYAML's resolver accepts but cannot build (`2001-13-45`)
        raise FrontMatterError(f"the front matter is not valid YAML: {exc}") from None
    if not isinstance(meta, dict):
        raise FrontMatterError("the front matter is not a mapping of keys to values")
    return cast(dict[str, Any], meta), "\n".join(lines[end + 1 :])


def _check_nesting(front: str) -> None:
    """Refuse front matter nested deeper than any such file needs before PyYAML sees it."""
    depth = deepest = 0
    for char in front:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(depth - 1, 0)
    indent = max((len(line) - len(line.lstrip(" ")) for line in front.split("\n")), default=0)
    if deepest > NESTING_MAX or indent > INDENT_MAX:
        raise FrontMatterError(
            f"the front matter is nested too deeply (more than {NESTING_MAX} brackets or {INDENT_MAX} columns)"
        )
