"""The system prompt and the token estimates the loop budgets with.

The system prompt is built from parts, in order: the built-in default, the workspace's project instructions
(`AGENTS.md`, else `CLAUDE.md`), the list of its skills (name and description only), each `*.md` file in
`<workspace>/.agent_server/prompts/` (sorted by file name), then the configured `system_prompt`. Each part is
traced (id, title, source, estimated tokens) in the turn's `prompt_trace` event. The prompt is built once per
turn, so every round of a turn sends the same bytes (provider prompt caches keep working); the per-turn runtime
notes come last.

Token counts are estimates (about four characters per token), good enough to decide when to
compact; no tokenizer is involved.
"""

from __future__ import annotations

import json
import logging
import math
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent_server import events
from agent_server.types import ImagePart, Message, ProjectGuidance, ToolCall, ToolSpec

logger = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4
"""Role and separators of one message, as chat formats spend them."""
IMAGE_TOKENS = 765
"""An image counted at a typical high-detail cost, whatever its byte size."""
PROMPTS_DIR = Path(".agent_server") / "prompts"
"""Where workspace prompt files live, relative to the workspace."""

DEFAULT_PROMPT = """\
You are an agent working in the user's workspace through the tools you are given.

- Use the tools to find out; do not guess file contents, names or results you can check.
- Be accurate: when you state a fact from the workspace, cite the file (and line where useful).
- Read before you conclude; prefer a few targeted tool calls over many broad ones.
- If a tool fails, read its error, adjust the call or explain what blocked you.
- Say plainly when something is unknown, ambiguous or not done.
- Answer concisely: lead with the result, then the evidence."""


INSTRUCTIONS_INTRO = (
    "The workspace's instruction file ({path}) follows. Follow it for work in this workspace. A subdirectory "
    "may have its own, given to you with the result of the first tool call that touches it: for work under "
    "that subdirectory it takes precedence where they disagree."
)
SKILLS_INTRO = (
    "Skills give instructions for particular tasks. When a task matches a skill's description, call "
    "load_skill with its name before you start, then follow it (read its files with read_file; run its "
    "scripts only with run_command)."
)


@dataclass(frozen=True, slots=True)
class PromptPart:
    """One section of the system prompt."""

    id: str
    """`default`, `instructions`, `skills`, `workspace:<file name>` or `config`."""
    title: str
    source: str
    """Where the text came from: `builtin`, a path relative to the workspace, or `settings`."""
    body: str


def estimate_tokens(text: str) -> int:
    """About four characters per token, rounded up; at least 1 for non-empty text."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def estimate_message_tokens(messages: Iterable[Message]) -> int:
    """Estimated tokens of messages: text, tool calls (as JSON), images and a per-message overhead."""
    return sum(_message_tokens(message) for message in messages)


_MESSAGE_TOKENS: dict[int, tuple[weakref.ref[Message], int]] = {}
"""Each message's estimate while the message lives (by identity; an entry goes with its message). A long
session's history is the same message objects turn after turn (the store remembers them parsed), and
estimating all of them at each turn's start is work on the event loop that grows with the session."""


def _message_tokens(message: Message) -> int:
    key = id(message)
    kept = _MESSAGE_TOKENS.get(key)
    if kept is not None and kept[0]() is message:
        return kept[1]
    tokens = MESSAGE_OVERHEAD_TOKENS + estimate_tokens(message.text())
    if not isinstance(message.content, str):
        tokens += IMAGE_TOKENS * sum(isinstance(part, ImagePart) for part in message.content)
    if message.tool_calls:
        tokens += estimate_call_tokens(message.tool_calls)
    _MESSAGE_TOKENS[key] = (weakref.ref(message, lambda _: _MESSAGE_TOKENS.pop(key, None)), tokens)
    return tokens


def estimate_call_tokens(calls: Sequence[ToolCall]) -> int:
    """Estimated tokens of tool calls, as their JSON (serialised: proportional to the arguments' size)."""
    dumped = [call.model_dump(mode="json", exclude_none=True) for call in calls]
    return estimate_tokens(json.dumps(dumped, ensure_ascii=False))


def estimate_tool_tokens(tools: Sequence[ToolSpec]) -> int:
    """Estimated tokens of the tool schemas sent with a request (their JSON length / 4)."""
    return sum(_tool_tokens(tool) for tool in tools)


_TOOL_TOKENS: dict[int, tuple[ToolSpec, int]] = {}
"""Each spec's estimate by identity (the spec is kept, so its id is not reused while cached): the registry
hands out the same spec objects turn after turn, and dumping every schema each turn is measurable."""
_TOOL_TOKENS_KEPT = 1024


def _tool_tokens(tool: ToolSpec) -> int:
    cached = _TOOL_TOKENS.get(id(tool))
    if cached is not None and cached[0] is tool:
        return cached[1]
    if len(_TOOL_TOKENS) >= _TOOL_TOKENS_KEPT:
        _TOOL_TOKENS.clear()  # bounded: specs of servers that changed their tools are dropped with the rest
    tokens = estimate_tokens(json.dumps(tool.model_dump(mode="json"), ensure_ascii=False))
    _TOOL_TOKENS[id(tool)] = (tool, tokens)
    return tokens


def build_prompt_parts(
    workspace: Path | None, config_prompt: str | None, guidance: ProjectGuidance | None = None
) -> list[PromptPart]:
    """The system prompt's parts: the default, the project's instructions and skills (`guidance`), the
    workspace's prompt files, the configured prompt.

    With a workspace it reads files (blocking): call it from a worker thread in async code. A prompt
    file that cannot be read or decoded as UTF-8 is skipped with a warning; an empty one is skipped
    silently. `workspace=None` leaves the prompt files out (there is no prompt directory).
    """
    parts = [PromptPart(id="default", title="Agent", source="builtin", body=DEFAULT_PROMPT)]
    if guidance is not None:
        parts.extend(guidance_parts(guidance))
    if workspace is not None:
        parts.extend(_workspace_parts(workspace))
    if config_prompt and config_prompt.strip():
        parts.append(
            PromptPart(id="config", title="Configured instructions", source="settings", body=config_prompt.strip())
        )
    return parts


def guidance_parts(guidance: ProjectGuidance) -> list[PromptPart]:
    """The project's instructions and the list of its skills, as prompt parts (none for what is absent)."""
    parts: list[PromptPart] = []
    instructions = guidance.instructions
    if instructions is not None:
        path = instructions.file.path
        body = INSTRUCTIONS_INTRO.format(path=path) + "\n\n" + instructions.text
        parts.append(PromptPart(id="instructions", title=f"Project instructions ({path})", source=path, body=body))
    if guidance.skills:
        lines = [SKILLS_INTRO, ""] + [f"- {skill.name}: {skill.description}" for skill in guidance.skills]
        if guidance.unlisted:
            lines.append(f"[{guidance.unlisted} more skill folder(s) were not looked at: the limit is skills_max]")
        parts.append(PromptPart(id="skills", title="Skills", source="skills", body="\n".join(lines)))
    return parts


def _workspace_parts(workspace: Path) -> list[PromptPart]:
    directory = workspace / PROMPTS_DIR
    try:
        files = sorted((p for p in directory.glob("*.md") if p.is_file()), key=lambda p: p.name)
    except OSError as exc:
        logger.warning("cannot list prompt directory %s: %s", directory, exc.strerror)
        return []
    parts: list[PromptPart] = []
    for path in files:
        source = (PROMPTS_DIR / path.name).as_posix()
        try:
            body = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            logger.warning("skipping prompt file %s: %s", source, exc)
            continue
        if body:
            parts.append(PromptPart(id=f"workspace:{path.name}", title=path.stem, source=source, body=body))
    return parts


def _render_part(part: PromptPart) -> str:
    return f"## {part.title}\n{part.body}"


def render_system_prompt(parts: Sequence[PromptPart]) -> str:
    """The system message text: each part as `## title` then its body, separated by blank lines."""
    return "\n\n".join(_render_part(part) for part in parts)


def trace_parts(parts: Sequence[PromptPart]) -> list[events.PromptPart]:
    """The parts as the `prompt_trace` event reports them, with estimated tokens."""
    return [
        events.PromptPart(id=part.id, title=part.title, source=part.source, tokens=estimate_tokens(_render_part(part)))
        for part in parts
    ]
