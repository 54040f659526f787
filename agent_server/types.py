"""Leaf module: the normalised conversation and the records every layer shares.

Nothing here imports from the package. Messages follow the OpenAI Chat Completions shape
(roles `system`/`user`/`assistant`/`tool`, assistant `tool_calls`, `tool_call_id` on tool
results) because every provider we speak maps onto it; content is either plain text or a
list of text and image parts so that tool results carrying images reach the model as images.
"""

import secrets
import time
import unicodedata
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

LOCAL_PRINCIPAL = "local"
"""Whoever reaches the server without authentication (stdio, ACP, an unauthenticated loopback HTTP bind, a
Python program): the one principal there, and the owner of what a store held before principals existed."""
MAX_PRINCIPAL_LENGTH = 256


def principal_problem(name: object) -> str | None:
    """Why `name` cannot be a principal (a string of 1 to 256 characters, no control or format characters)."""
    if not isinstance(name, str) or not 0 < len(name) <= MAX_PRINCIPAL_LENGTH:
        return f"a principal is a name of 1 to {MAX_PRINCIPAL_LENGTH} characters"
    if any(unicodedata.category(char).startswith("C") for char in name):
        return "a principal's name has no control or format characters"
    return None


def new_id(prefix: str) -> str:
    """A short random identifier such as `ses_3f9a...`; unique enough for one user's store."""
    return f"{prefix}_{secrets.token_hex(8)}"


def one_line(text: str, limit: int = 120) -> str:
    """`text` on one line (whitespace runs become one space), cut to `limit` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


UNTITLED = "Untitled session"
"""The title of a session made without one, until its first turn names it (`title_from` its prompt)."""
TITLE_CHARS = 60


def title_from(prompt: str) -> str:
    """A session's title from a prompt: on one line, cut to `TITLE_CHARS`."""
    return one_line(prompt, TITLE_CHARS)


def utc_now() -> str:
    """The current time as an ISO 8601 string in UTC (millisecond precision), as
    `datetime.now(UTC).isoformat(timespec="milliseconds")` spells it. A turn takes several: the part up to the
    second is formatted once a second (`isoformat` costs about ten times the rest)."""
    global _second_prefix
    now = time.time()
    second = int(now)
    if _second_prefix[0] != second:
        _second_prefix = (second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    return f"{_second_prefix[1]}.{int((now - second) * 1000):03d}+00:00"


_second_prefix: tuple[int, str] = (-1, "")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


# --- content and messages ---------------------------------------------------------------


class TextPart(_Model):
    type: Literal["text"] = "text"
    text: str


class ImagePart(_Model):
    type: Literal["image"] = "image"
    data: str
    """Base64-encoded image bytes."""
    mime_type: str


ContentPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(_Model):
    """A tool call the model asked for."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    arguments_error: str | None = None
    """Set when the model sent arguments that are not a JSON object; the tool is then not run."""


class NativeContent(_Model):
    """A model's answer as its own API wrote it, kept so that the same API reads it back unchanged in later
    requests: Anthropic's content blocks with their thinking blocks (and `signature`s, or `redacted_thinking`),
    the Responses API's output items with their encrypted reasoning items. Other providers ignore it."""

    api: str
    """The API that wrote it: `anthropic` or `openai-responses`."""
    content: list[dict[str, Any]]


class Message(_Model):
    role: Role
    content: str | list[ContentPart] = ""
    tool_calls: list[ToolCall] = Field(default_factory=list[ToolCall])
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    """A tool result that is an error (Anthropic's `tool_result.is_error`)."""
    native: NativeContent | None = None
    """An assistant answer as its API wrote it (thinking, reasoning items), when it carried such parts."""

    def text(self) -> str:
        """The message's text, with image parts left out."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part.text for part in self.content if isinstance(part, TextPart))


class ToolAnnotations(_Model):
    """What a tool says of itself, as MCP's tool annotations (hints, not guarantees).

    The fields are MCP's: `read_only` is `readOnlyHint`, and so on; None is "not said".
    A mounted server's annotations are hints only unless its entry says `trust: true` (DESIGN 3.7).
    """

    title: str | None = None
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None


ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]
"""What a tool does, as editors draw its calls (the ACP vocabulary): declared by each built-in tool with its spec;
`other` for the rest (mounted servers' tools, plugins)."""


class ToolSpec(_Model):
    """A tool the agent's model can call."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    source: str = "builtin"
    """`builtin`, `plugin`, or `mcp:<server>`."""
    annotations: ToolAnnotations = Field(default_factory=ToolAnnotations)
    kind: ToolKind = "other"


class DroppedTool(_Model):
    """A tool that is not offered to the model, and why (a name clash, an invalid input schema)."""

    name: str
    """The agent-side name it would have had."""
    source: str
    reason: str


class InstructionFile(_Model):
    """A project instruction file (`AGENTS.md`, else `CLAUDE.md`) the model was given."""

    path: str
    """Relative to the workspace, with `/`."""
    applies_to: str
    """The directory whose work it governs: `.` (the workspace: in the system prompt) or a subdirectory (given
    with the first tool result of the turn that touched it)."""
    size: int
    """Bytes on disk."""
    included_bytes: int
    """Bytes the model got (at most `instructions_max_bytes`)."""
    truncated: bool = False


class SkillInfo(_Model):
    """An Agent Skill the model may load with `load_skill` (its name and description are in the system prompt)."""

    name: str
    description: str
    path: str
    """Its SKILL.md: relative to the workspace for the workspace's skills, else absolute."""


class SkippedSkill(_Model):
    """A skill folder that is not offered, and why (bad front matter, a name that breaks the standard's rules)."""

    path: str
    reason: str


class InstructionText(_Model):
    """An instruction file and the text of it the model gets (cut to the size limit, with a note)."""

    file: InstructionFile
    text: str


class ProjectGuidance(_Model):
    """What a workspace tells its agent: its instructions and the skills found (README "Project instructions
    and skills"), as one scan found them."""

    instructions: InstructionText | None = None
    skills: list[SkillInfo] = Field(default_factory=list[SkillInfo])
    skipped: list[SkippedSkill] = Field(default_factory=list[SkippedSkill])
    unlisted: int = 0
    """Skill folders not looked at, past `skills_max`."""


class ToolResult(_Model):
    """What a tool call produced. A failed call is data for the model, never an exception."""

    call_id: str
    name: str
    is_error: bool = False
    content: list[ContentPart] = Field(default_factory=list[ContentPart])
    structured: dict[str, Any] | None = None
    duration_s: float = 0.0
    _found_instructions: tuple[InstructionText, ...] | None = PrivateAttr(default=None)

    def text(self) -> str:
        return "\n".join(part.text for part in self.content if isinstance(part, TextPart))

    @property
    def found_instructions(self) -> tuple[InstructionText, ...] | None:
        """The instruction files of the subdirectories down to the path a built-in tool worked on, looked up in
        the tool's own worker thread (None: not looked up). For the turn to pass on; neither stored nor sent."""
        return self._found_instructions

    def noting(self, found: tuple[InstructionText, ...] | None) -> "ToolResult":
        """This result, just made, with `found_instructions` set (kept by `model_copy`)."""
        self._found_instructions = found
        return self


# --- turn records ------------------------------------------------------------------------

TurnStatus = Literal[
    "running", "awaiting_input", "completed", "truncated", "failed", "halted", "cancelled", "timed_out", "interrupted"
]
"""`awaiting_input` is never stored: it is a running background turn's live status while it waits for its
client's answer (`agent_server.runtime.park`); the store says `running` meanwhile. `truncated`: the final
answer was cut at the model's output token limit (its text is the cut answer)."""
StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "content_filter", "pause_turn"]
"""Why the model stopped writing, in one vocabulary for every provider: Chat Completions' `stop`,
`tool_calls`, `length`, `content_filter`; Anthropic's `end_turn`, `tool_use`, `max_tokens`, `stop_sequence`,
`refusal` (as `content_filter`), `pause_turn`; the Responses API's `completed` and `incomplete` reasons.
`max_tokens`: cut at the output token limit."""
TraceMode = Literal["standard", "extended"]


class Usage(_Model):
    """Token counts; None where the provider did not report a count (unknown, not zero).

    `prompt_tokens` is every input token of the call, cache reads and writes included (Anthropic reports
    them apart; they are added here so that the figure means the same for every provider);
    `cache_read_tokens` and `cache_write_tokens` are the parts of it read from and written to the provider's
    prompt cache, `reasoning_tokens` the part of `completion_tokens` spent reasoning. `cost_usd` prices each
    kind at its own rate, and is None when a price it needs is unknown.
    """

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    cost_usd: float | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None

    def __add__(self, other: "Usage") -> "Usage":
        """Known counts add up; a count stays None only when neither side knows it. A cost stays unknown once
        a side that used tokens has no cost: a sum that left it out would look like the whole."""
        return Usage(
            prompt_tokens=_add(self.prompt_tokens, other.prompt_tokens),
            completion_tokens=_add(self.completion_tokens, other.completion_tokens),
            total_tokens=_add(self.total_tokens, other.total_tokens),
            cost_usd=None if self._unpriced() or other._unpriced() else _add(self.cost_usd, other.cost_usd),
            cache_read_tokens=_add(self.cache_read_tokens, other.cache_read_tokens),
            cache_write_tokens=_add(self.cache_write_tokens, other.cache_write_tokens),
            reasoning_tokens=_add(self.reasoning_tokens, other.reasoning_tokens),
        )

    def _unpriced(self) -> bool:
        return self.cost_usd is None and bool(self.prompt_tokens or self.completion_tokens)


_N = TypeVar("_N", int, float)


def _add(a: _N | None, b: _N | None) -> _N | None:
    if a is None:
        return b
    return a if b is None else a + b


class AssistantTurn(_Model):
    phase: str
    """`initial` for the first model call of a turn, `followup_N` after tool round N."""
    text: str
    tool_calls: list[ToolCall] = Field(default_factory=list[ToolCall])
    reasoning: str | None = None
    """The model's reasoning text; kept only with trace mode `extended`."""
    stop_reason: StopReason | None = None
    """Why the model stopped (None: the provider did not say, or said something unknown)."""
    usage: Usage | None = None
    """What this model call cost (the record's `usage` is the turn's sum)."""
    duration_s: float | None = None
    """How long the model call took, retries included (None in records of before it was measured)."""


class ToolRound(_Model):
    tool_round: int
    requested_tools: list[ToolCall]
    tool_results: list[ToolResult]


class Transition(_Model):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, defer_build=True)

    from_: str = Field(alias="from")
    to: str
    reason: str


class ErrorInfo(_Model):
    type: str
    message: str


class CompactionRecord(_Model):
    summary: str
    mode: Literal["llm", "fallback"]
    compacted_message_count: int
    preserved_message_count: int
    estimated_tokens_before: int
    estimated_tokens_after: int
    reason: str
    created_at: str
    dry_run: bool = False
    error: str | None = None
    """Why the model summary failed, when `mode` is `fallback`."""


ApprovalOutcome = Literal[
    "allow_once",
    "allow_session",
    "remembered",
    "deny",
    "cancelled",
    "timeout",
    "error",
    "no_channel",
    "headless_allow",
    "policy_deny",
    "client_declined",
]
"""How the gate settled a call that it did not simply let through (see `ApprovalRecord`)."""


class ApprovalRecord(_Model):
    """One call the approval gate stopped at (DESIGN 3.7). Calls that need no approval, and calls the
    policy allows outright, are not recorded.

    `decision`: the user's `allow_once`, `allow_session`, `deny` or `cancelled` (dismissed the question, or
    the turn was cancelled or timed out while it waited);
    `remembered` (an earlier `allow_session` of this session: not asked); `timeout` (no answer within
    `approvals.timeout_s`); `error` (the channel failed); `no_channel` (nobody could be asked: denied by
    `approvals.headless`); `headless_allow` (nobody could be asked: allowed by `approvals.headless`);
    `policy_deny` (the policy denies the tool); `client_declined` (the client declined or dismissed the
    question sooner than a person can answer: it asked nobody). Only the `allow_*`, `remembered` and `headless_allow`
    calls ran. `channel`: the channel asked (`elicitation`, ...), or `session` (remembered), `none`
    (no channel) or `policy`.
    """

    call_id: str
    tool: str
    channel: str
    decision: ApprovalOutcome
    latency_s: float = 0.0
    """How long the gate held the call (the user's answer time, when asked)."""

    @property
    def allowed(self) -> bool:
        return self.decision in ("allow_once", "allow_session", "remembered", "headless_allow")


class PendingApproval(_Model):
    """A question waiting in the web view (settings `approvals.web`), as the store keeps it for every page: the
    call as the gate presents it to every channel (`agent_server.presentation`), and until when it waits."""

    question_id: str
    session_id: str
    turn_id: str
    call_id: str
    tool: str
    source: str
    message: str
    """The whole question as text (`ApprovalRequest.message`): the call shown faithfully, or cut saying so."""
    shown: str
    """The call as shown (escaped; cut when `cut`)."""
    cut: bool = False
    hidden_chars: int = 0
    warning: str | None = None
    choices: list[str]
    default_choice: str | None = None
    principal: str = LOCAL_PRINCIPAL
    created_at: str
    expires_at: str


class TurnRecord(_Model):
    turn_id: str
    session_id: str
    trace_id: str
    status: TurnStatus
    prompt: str
    final_text: str = ""
    assistant_turns: list[AssistantTurn] = Field(default_factory=list[AssistantTurn])
    tool_rounds: list[ToolRound] = Field(default_factory=list[ToolRound])
    transitions: list[Transition] = Field(default_factory=list[Transition])
    usage: Usage = Field(default_factory=Usage)
    compaction: CompactionRecord | None = None
    approvals: list[ApprovalRecord] = Field(default_factory=list[ApprovalRecord])
    error: ErrorInfo | None = None
    trace: TraceMode = "standard"
    model: str | None = None
    started_at: str
    finished_at: str | None = None
    agent: str | None = None
    """The named agent the turn ran as (chosen, or its session's); None: the server's own."""
    structured_output: Any = None
    """The final answer as a JSON value, valid against the turn's `output_schema`; None without one (or when the
    answer never matched: the turn then failed `output_invalid`)."""
    command: str | None = None
    """The slash command (e.g. `tools`) a front door answered itself, without the model: the reply is
    `final_text`, and nothing of it is in the history the model reads. None for a turn of the model."""
    instructions: list[InstructionFile] = Field(default_factory=list[InstructionFile])
    """The project instruction files the model was given this turn, with their sizes."""


class SessionInfo(_Model):
    session_id: str
    title: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: str
    updated_at: str
    turn_count: int = 0
    active: bool = False


class StoredMessage(_Model):
    """A history message as the store keeps it: ordered by `seq`, tagged with its turn."""

    seq: int
    turn_id: str | None
    message: Message


class SessionHistory(_Model):
    """A session's live context: the latest compaction summary and the messages after it."""

    summary: str | None
    messages: list[StoredMessage]
