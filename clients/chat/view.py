"""What the chat shows: colours, the screen, and the live view of a running turn.

Pure presentation: it turns agent-server's events and turn records into lines; `chat.py` owns the
connection, the input and the commands.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from typing import Any, TextIO

import anyio

try:  # line editing and history for input(), where the platform has it
    import readline  # noqa: F401

    HAVE_READLINE = True
except ImportError:  # pragma: no cover - Windows
    HAVE_READLINE = False

# --- screen ------------------------------------------------------------------------------


class Style:
    """ANSI styling that is the identity when colour is off."""

    CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "blue": "34", "cyan": "36"}

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, name: str, text: str) -> str:
        if not self.enabled or not text:
            return text
        return f"\x1b[{self.CODES[name]}m{text}\x1b[0m"

    def prompt(self, text: str) -> str:
        """A coloured input() prompt; readline needs the escapes fenced so it can count the width."""
        if not self.enabled:
            return text
        start, end = ("\001", "\002") if HAVE_READLINE else ("", "")
        return f"{start}\x1b[1;34m{end}{text}{start}\x1b[0m{end}"


class Screen:
    """An append-only terminal log that knows whether the cursor is at the start of a line."""

    def __init__(self, out: TextIO, style: Style) -> None:
        self.out = out
        self.style = style
        self.midline = False

    def write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()
            self.midline = not text.endswith("\n")

    def line(self, text: str = "", style: str | None = None) -> None:
        if self.midline:
            self.write("\n")
        self.write((self.style(style, text) if style else text) + "\n")

    @property
    def width(self) -> int:
        return shutil.get_terminal_size((100, 24)).columns


def shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def seconds(value: float) -> str:
    return f"{value:.2f}s" if value < 10 else f"{value:.1f}s"


# --- the live view of a turn -------------------------------------------------------------


class TurnView:
    """Renders the full events of the running call; events arriving while no call runs are dropped."""

    def __init__(self, screen: Screen) -> None:
        self.screen = screen
        self.active = False
        self.done = anyio.Event()
        self.turn_id: str | None = None
        self.session_id: str | None = None
        self.streamed = ""
        self.errors = 0

    def start(self) -> None:
        self.active = True
        self.done = anyio.Event()
        self.turn_id = self.session_id = None
        self.streamed = ""
        self.errors = 0

    def stop(self) -> None:
        self.active = False

    def on_event(self, event: dict[str, Any]) -> None:
        if not self.active:
            return
        handler: Callable[[dict[str, Any]], None] | None = getattr(self, f"_on_{event.get('type')}", None)
        if handler is not None:
            handler(event)

    def _on_turn(self, event: dict[str, Any]) -> None:
        self.turn_id, self.session_id = event.get("turn_id"), event.get("session_id")

    def _on_prompt_trace(self, event: dict[str, Any]) -> None:
        prompt = sum(part.get("tokens", 0) for part in event.get("parts", []))
        history, tools = event.get("history_tokens", 0), event.get("tool_schema_tokens", 0)
        total = prompt + history + tools
        parts = f"system {prompt:,}, history {history:,}, tools {tools:,}"
        self.screen.line(f"· context ~{total:,} tokens ({parts})", "dim")

    def _on_status(self, event: dict[str, Any]) -> None:
        self.screen.line(f"· {event.get('message') or event.get('phase')}", "dim")

    def _on_token(self, event: dict[str, Any]) -> None:
        delta = str(event.get("delta", ""))
        self.streamed += delta
        self.screen.write(delta)

    def _on_tool_start(self, event: dict[str, Any]) -> None:
        call = event.get("call") or {}
        name = str(call.get("name", "?"))
        if call.get("arguments_error"):
            shown = f"(bad arguments: {call['arguments_error']})"
        else:
            shown = json.dumps(call.get("arguments") or {}, ensure_ascii=False)
        room = self.screen.width - len(name) - 4
        self.screen.line(self.screen.style("cyan", f"→ {name} ") + self.screen.style("dim", shorten(shown, room)))

    def _on_tool_progress(self, event: dict[str, Any]) -> None:
        total = event.get("total")
        amount = f"{event.get('progress', 0):g}" + (f"/{total:g}" if total else "")
        self.screen.line(f"  … {event.get('name')} {amount} {event.get('message') or ''}".rstrip(), "dim")

    def _on_tool_result(self, event: dict[str, Any]) -> None:
        result = event.get("result") or {}
        name, took = str(result.get("name", "?")), seconds(float(result.get("duration_s") or 0.0))
        text = " ".join(part.get("text", "") for part in result.get("content", []) if part.get("type") == "text")
        if result.get("is_error"):
            head = self.screen.style("red", f"✗ {name} failed in {took}")
        else:
            head = self.screen.style("green", f"← {name} ok in {took}")
        room = self.screen.width - len(name) - len(took) - 16
        self.screen.line(head + (self.screen.style("dim", " · " + shorten(text, room)) if text.strip() else ""))

    def _on_compaction(self, event: dict[str, Any]) -> None:
        self.screen.line(describe_compaction(event.get("record") or {}), "yellow")

    def _on_error(self, event: dict[str, Any]) -> None:
        self.errors += 1
        self.screen.line(f"! {event.get('error_type')}: {event.get('message')}", "red")

    def _on_done(self, event: dict[str, Any]) -> None:
        self.done.set()


def describe_compaction(record: dict[str, Any]) -> str:
    count = record.get("compacted_message_count", 0)
    if not count:
        return "⟲ nothing to compact yet"
    before, after = record.get("estimated_tokens_before", 0), record.get("estimated_tokens_after", 0)
    text = f"⟲ compacted {count} message(s) ({record.get('mode')}), ~{before:,} → ~{after:,} tokens"
    return text + (f" [{record['error']}]" if record.get("error") else "")


def _count(tokens: object) -> str:
    """A token count; `?` where the server did not report one (usage fields are null then)."""
    return f"{tokens:,}" if isinstance(tokens, int) else "?"


def usage_line(record: dict[str, Any], took: float) -> tuple[str, str]:
    """The closing line of a turn and its style."""
    status = str(record.get("status", "?"))
    usage = record.get("usage") or {}
    calls = len(record.get("tool_calls", []))
    parts = [status, f"{record.get('model_calls', 0)} model call(s)", f"{calls} tool call(s)"]
    parts.append(f"tokens {_count(usage.get('prompt_tokens'))} in / {_count(usage.get('completion_tokens'))} out")
    if usage.get("cost_usd") is not None:
        parts.append(f"${usage['cost_usd']:.4f}")
    parts.append(seconds(took))
    style = {"completed": "green", "truncated": "yellow", "halted": "yellow", "timed_out": "yellow"}.get(status, "red")
    return "── " + " · ".join(parts) + " ──", style
