"""Settings: everything the server is configured with, validated once at construction.

Sources, lowest precedence first: defaults, the config file (`--config`, JSON or TOML, keys as
below), `AGENT_SERVER_STORE` (the `store_url`), command-line flags; `load_settings` merges them. Of
the environment, settings read only that and what mounted servers' entries reference (`${VAR}`), from
`load_settings(environ=...)` or the process environment; the model's variables (`OPENAI_API_KEY`,
never a setting; `OPENAI_BASE_URL` over `openai.base_url`; `AGENT_SERVER_MODEL`) are read by
`agent_server.runtime`.
"""

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Self, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agent_server.errors import ConfigError
from agent_server.http_settings import AuthSettings, HttpSettings
from agent_server.mounts.config import MountConfig, load_mcp_config_file, parse_mcp_servers
from agent_server.output_schema import check_output_schema
from agent_server.redaction import redact_url
from agent_server.turn_options import AGENT_NAME
from agent_server.view.settings import ViewSettings

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
STORE_ENV = "AGENT_SERVER_STORE"


class Price(BaseModel):
    """USD per million tokens for one model: input, output, and the prompt cache's reads and writes.

    A cache price left out is unknown: a call that read from (or wrote to) the cache then has no cost
    (`null`), never one that prices those tokens at 0 or as plain input.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cache_read_per_mtok: float | None = Field(default=None, ge=0)
    cache_write_per_mtok: float | None = Field(default=None, ge=0)


class OpenAIOptions(BaseModel):
    """The OpenAI-compatible Chat Completions provider (`--llm openai:MODEL`).

    The API key is never a setting: it comes from `OPENAI_API_KEY` only, so it cannot end up in a
    config dump, a log line or a turn record.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str = "https://api.openai.com/v1"
    """Already ends in `/v1` (the OpenAI SDK's convention); `/chat/completions` is appended."""
    model: str | None = None
    stream: bool = True
    connect_timeout_s: float = Field(default=10, gt=0)
    read_timeout_s: float = Field(default=120, gt=0)
    max_attempts: int = Field(default=4, ge=1, le=10)
    backoff_base_s: float = Field(default=0.5, ge=0)
    backoff_max_s: float = Field(default=8, ge=0)
    retry_after_max_s: float = Field(default=30, ge=0)
    max_connections: int | None = Field(default=None, ge=1)
    """Model calls in flight at once (HTTP connections to the endpoint); None: no limit of the client's own, so
    the server's concurrency decides (httpx's default would hold the 101st call back, and fail it after
    `connect_timeout_s`). A call waiting for a free connection waits at most `connect_timeout_s`."""
    max_keepalive_connections: int = Field(default=100, ge=0)
    """Idle connections kept open for the next calls (httpx's default keeps 20)."""
    retry_read_timeout: bool | None = None
    """Whether a read timeout (no data for `read_timeout_s`) is retried. None: yes, except on a local endpoint
    (`localhost`, a loopback, private or link-local address), which is likely still busy with the request: a
    retry would queue behind it."""
    prices: dict[str, Price] = Field(default_factory=dict[str, Price])
    """Model name -> price; `usage.cost_usd` is set when the turn's model has one."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Sent as `max_tokens` when set: bounds a runaway generation (local servers default to unbounded)."""
    temperature: float | None = Field(default=None, ge=0, le=2)
    """Sent when set; 0 with a `seed` makes a local model's runs repeatable."""
    seed: int | None = None
    extra_body: dict[str, Any] = Field(default_factory=dict[str, Any])
    """Merged into every request body last (server-specific fields such as `top_k` or `cache_prompt`)."""
    parse_text_tool_calls: Literal["off", "auto"] = "off"
    """`auto`: an answer that is only tool calls written as JSON (bare, in a ```json fence or in
    `<tool_call>` tags) naming offered tools becomes those calls; for local models that do this."""


DEFAULT_PROTECTED_PATHS = (
    ".git",
    ".agent_server",
    ".mcp.json",
    ".vscode",
    ".cursor",
    ".claude",
    ".codex",
    ".gemini",
    ".zed",
    ".agents",
)
"""`tools.protected_paths` by default: git's own files (a hook runs code), this server's state, and the places
where editors and agents (this one included) read their configuration and their MCP servers."""


class AnthropicOptions(BaseModel):
    """The Anthropic Messages API provider (`--llm anthropic:MODEL`).

    The API key comes from `ANTHROPIC_API_KEY` only, never a setting; `ANTHROPIC_BASE_URL` wins over
    `base_url`. As in Anthropic's own SDK the base has no `/v1`: requests go to `{base_url}/v1/messages`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str = "https://api.anthropic.com"
    model: str | None = None
    version: str = "2023-06-01"
    """Sent as the `anthropic-version` header."""
    stream: bool = True
    connect_timeout_s: float = Field(default=10, gt=0)
    read_timeout_s: float = Field(default=120, gt=0)
    max_attempts: int = Field(default=4, ge=1, le=10)
    backoff_base_s: float = Field(default=0.5, ge=0)
    backoff_max_s: float = Field(default=8, ge=0)
    retry_after_max_s: float = Field(default=30, ge=0)
    max_connections: int | None = Field(default=None, ge=1)
    """As `openai.max_connections`."""
    max_keepalive_connections: int = Field(default=100, ge=0)
    """As `openai.max_keepalive_connections`."""
    retry_read_timeout: bool | None = None
    """As `openai.retry_read_timeout`."""
    max_tokens: int = Field(default=8192, ge=1)
    """Sent as `max_tokens` (the API requires it): the longest answer, thinking included."""
    temperature: float | None = Field(default=None, ge=0, le=1)
    """Sent when set (not with thinking, which requires the default)."""
    thinking_budget_tokens: int | None = Field(default=None, ge=1024)
    """Extended thinking with this budget (at least 1024, below `max_tokens`); None: no thinking."""
    cache: bool = True
    """Prompt caching: `cache_control` breakpoints on the tools, the system prompt and the conversation."""
    extra_body: dict[str, Any] = Field(default_factory=dict[str, Any])
    """Merged into every request body last (e.g. `{"top_k": 40}`)."""

    @model_validator(mode="after")
    def _budget_below_max_tokens(self) -> Self:
        budget = self.thinking_budget_tokens
        if budget is not None and budget >= self.max_tokens:
            raise ValueError(f"thinking_budget_tokens ({budget}) must be below max_tokens ({self.max_tokens})")
        return self


class ToolsOptions(BaseModel):
    """The built-in tools that change things (`write_file`, `edit_file`, `run_command`) and their bounds.

    Both kinds are off unless enabled here or by `--allow-write` / `--allow-exec`; when off, their tools
    are not offered to the model at all.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    write: bool = False
    """Offer `write_file` and `edit_file`."""
    exec: bool = False
    """Offer `run_command`."""
    command_timeout_s: float = Field(default=120, gt=0, le=86_400)
    """Default and largest time limit of one `run_command`; its `timeout_s` argument may only shorten it."""
    command_kill_grace_s: float = Field(default=1.0, ge=0, le=60)
    """A stopped command's process group gets SIGTERM, then SIGKILL this long after."""
    command_output_max_bytes: int = Field(default=64 * 1024, ge=256)
    """Each of a command's stdout and stderr keeps at most this much (its head and tail), with a note."""
    edit_max_bytes: int = Field(default=8 * 1024 * 1024, ge=1)
    """`edit_file` refuses files larger than this (it holds the whole file in memory)."""
    sandbox: Literal["auto", "bwrap", "none"] = "auto"
    """Where `run_command` runs: `bwrap` (bubblewrap: own PID namespace and /proc, read-only root, writable
    workspace, private /tmp; commands are refused when it does not work here), `none` (no sandbox: a
    supervisor only sees that nothing outlives the call), `auto` (bwrap when it works, else none)."""
    sandbox_network: bool = False
    """Let sandboxed commands use the network (without it, a bwrap command has loopback only)."""
    write_max_bytes: int = Field(default=8 * 1024 * 1024, ge=1)
    """`write_file` refuses content larger than this (UTF-8 bytes), and `edit_file` an edit whose file would be."""
    protected_paths: tuple[str, ...] = DEFAULT_PROTECTED_PATHS
    """Where the write tools never write (`agent_server.tools.protected`): a name (`.git`, `.vscode`) is any
    file or directory of that name at any depth, a path with `/` is relative to the workspace (or absolute);
    compared case-insensitively, as given and with symlinks resolved. The server's own config files and
    state directory are protected as well, whatever this says."""
    protected_ask: tuple[str, ...] = ()
    """Protected paths (same forms) the user opts in to: a write there is asked every time, with a warning,
    never allowed by the policy, `allow_session` or `approvals.headless`."""


class _Choice(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ScriptModel(_Choice):
    """`script:PATH`: replay a JSON script of responses (tests, demos, CI)."""

    kind: Literal["script"] = "script"
    path: Path


class OpenAIModel(_Choice):
    """`openai:MODEL` (or `openai`, with `openai.model`): an OpenAI-compatible endpoint."""

    kind: Literal["openai"] = "openai"
    model: str | None = None
    """None: `openai.model` names it."""


class AnthropicModel(_Choice):
    """`anthropic:MODEL` (or `anthropic`, with `anthropic.model`): the Anthropic Messages API."""

    kind: Literal["anthropic"] = "anthropic"
    model: str | None = None


class OpenAIResponsesModel(_Choice):
    """`openai-responses:MODEL`: the OpenAI Responses API, with the `openai` settings and variables."""

    kind: Literal["openai-responses"] = "openai-responses"
    model: str | None = None
    """None: `openai.model` names it."""


class SamplingModel(_Choice):
    """`sampling`: the connected client's own model (MCP sampling), where the connection allows."""

    kind: Literal["sampling"] = "sampling"


ModelChoice = Annotated[
    ScriptModel | OpenAIModel | OpenAIResponsesModel | AnthropicModel | SamplingModel, Field(discriminator="kind")
]
MODEL_SPECS = "script:PATH, openai:MODEL, openai-responses:MODEL, anthropic:MODEL or sampling"


def parse_model_spec(spec: object) -> object:
    """`script:PATH`, `openai[:MODEL]`, `openai-responses[:MODEL]`, `anthropic[:MODEL]` and `sampling` as a
    choice object; anything else is left to validation."""
    if not isinstance(spec, str):
        return spec
    kind, _, arg = spec.partition(":")
    if kind == "script" and arg:
        return {"kind": "script", "path": arg}
    if kind in ("openai", "openai-responses", "anthropic"):
        return {"kind": kind, "model": arg or None}
    if spec == "sampling":
        return {"kind": "sampling"}
    raise ValueError(f"unknown model {spec!r}: expected {MODEL_SPECS}")


class AgentSettings(BaseModel):
    """A named agent defined in the settings (`agents: {name: {...}}`), as a `.claude/agents/*.md` file defines one
    (README "Named agents and structured output"): what it is for, its system prompt, the tools it gets (names and
    globs; None: all), its model (an alias of `models`, a provider spec or `inherit`), its tool-pass limit and the
    JSON Schema its answers must match."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    description: str = Field(min_length=1, max_length=4096)
    instructions: str = Field(default="", max_length=256 * 1024)
    tools: tuple[str, ...] | None = None
    model: str | None = None
    max_tool_passes: int | None = Field(default=None, ge=0, le=1000)
    output_schema: dict[str, Any] | None = None

    @field_validator("output_schema")
    @classmethod
    def _bounded_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else check_output_schema(value)


Rule = Literal["ask", "allow", "deny"]


class ApprovalSettings(BaseModel):
    """The approval gate's policy (DESIGN 3.7; decided by `agent_server.agent.approvals.decide`).

    A call needs approval when its tool may change things: a built-in or plugin tool unless it says
    `read_only`, a mounted tool unless it says `readOnlyHint` and its server entry says `trust: true`.
    `tools` maps globs of agent-side tool names (`fnmatch`, e.g. `write_file`, `fs__*`) to a rule that
    decides for every tool it matches, read-only or not; the most specific matching glob wins (an exact
    name, else the one with the most literal characters; a tie goes to the stricter rule: deny, ask,
    allow). A call that needs approval and matches no glob follows `default`. `ask` without a way to
    ask (no channel) follows `headless`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    default: Rule = "ask"
    tools: dict[str, Rule] = Field(default_factory=dict[str, Rule])
    headless: Literal["allow", "deny"] = "deny"
    timeout_s: float = Field(default=120, gt=0, le=3600)
    """The longest one ask (or a mounted server's forwarded elicitation) waits for the user's answer."""
    max_shown_chars: int = Field(default=6000, ge=500, le=1_000_000)
    """The most text a question shows of one call (`agent_server.presentation`): a longer call is shown cut,
    says how much is hidden, and its question defaults to deny."""
    web: bool | Literal["always"] = False
    """Questions answerable in the web view (`agent-server view`, or `/view` beside `/mcp`): `true` for a call
    whose turn has no other channel (a host without form elicitation), `"always"` for every question (the
    page is then the one channel); `false`: never. A question waits in the store, listed by every page on
    the same store, for at most `timeout_s` (see `agent_server.runtime.web_approvals`)."""


class LimitsSettings(BaseModel):
    """What one principal may hold at once (DESIGN 3.10): every principal has this room of its own, so that one
    caller's flood is refused at its limit and never takes another's (the totals grow with the principals)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    background_turns: int = Field(default=32, ge=1, le=10_000)
    """Background turns running at once (`background: true`, MCP tasks, 2026-07-28 rounds)."""
    parked_turns: int = Field(default=16, ge=1, le=10_000)
    """Of those, turns that may wait for the client's answers through the park (2026-07-28 rounds and tasks)."""
    queued_turns: int = Field(default=32, ge=1, le=100_000)
    """Calls of `run_turn` waiting for an earlier turn of their session to end."""
    mcp_sessions: int = Field(default=64, ge=1, le=10_000)
    """Handshake-era MCP sessions open at once over Streamable HTTP (each `initialize` opens one, until `DELETE`
    or 30 minutes idle); one more is refused with HTTP 429 naming this setting."""


class TracingSettings(BaseModel):
    """OpenTelemetry traces (README "Traces"; needs `pip install 'agent-server[otel]'`).

    `enabled`: None (the default) turns tracing on when the environment configures an exporter the standard
    way (`OTEL_TRACES_EXPORTER` other than `none`, or `OTEL_EXPORTER_OTLP_ENDPOINT` /
    `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) and `OTEL_SDK_DISABLED` is not `true`; true or false decide
    regardless. Where spans go, and the service name, headers and sampler, are the SDK's own `OTEL_*` settings.
    `content`: also record prompts, answers, tool arguments and results (redacted, each cut to
    `content_max_chars`); off by default, since they may hold secrets and personal data.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool | None = None
    content: bool = False
    content_max_chars: int = Field(default=4096, ge=64, le=1_000_000)
    """The most characters one recorded content attribute keeps (after redaction); a longer one says it was cut."""


REQUEST_STATE_KEY_MIN_BYTES = 32
"""What the SDK's request-state codec requires of a key."""


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    workspace: Path = Field(default_factory=Path.cwd)
    """Root the built-in tools are confined to, and where `.agent_server/prompts/` is read."""
    state_dir: Path | None = None
    """Where `state.db` lives; `<workspace>/.agent_server` when not set."""
    store_url: str | None = Field(default=None, repr=False)
    """A PostgreSQL URL (`postgresql://user:password@host/db`): sessions live there, shared by every
    replica that names it (needs `pip install 'agent-server[postgres]'`); None or `sqlite`: SQLite in
    `state_dir`. `load_settings` takes `AGENT_SERVER_STORE` over the config file's value, and `--store` over both."""
    llm: ModelChoice | None = None
    """The model: `script:PATH`, `openai:MODEL`, `openai-responses:MODEL`, `anthropic:MODEL` or `sampling` (or
    the object form, e.g. `{"kind": "openai", "model": "gpt-4.1-mini"}`); None: see `agent_server.runtime.fixed_llm`."""
    log_level: LogLevel = "INFO"
    system_prompt: str | None = None
    """Extra system prompt text, appended after the built-in default and the workspace prompt files."""
    context_window: int = Field(default=128_000, ge=1_000)
    """The model's context window in tokens; preflight compaction keys off it."""
    compact_threshold: float = Field(default=0.8, gt=0, le=1)
    """Compact before sampling when the estimated prompt exceeds this fraction of the window."""
    compact_keep_last: int = Field(default=8, ge=0)
    """Recent messages kept verbatim by preflight compaction and by `compact` by default."""
    max_tool_passes: int = Field(default=50, ge=0, le=1000)
    turn_timeout_s: float | None = Field(default=None, gt=0)
    request_state_keys: tuple[SecretStr, ...] = Field(default=(), repr=False)
    """Keys that seal a 2026-07-28 `run_turn` round's `requestState` (each at least 32 characters of secret
    randomness; the first seals, all unseal: append the new one first to rotate). Replicas behind one load
    balancer share them so that any replica can check a state another sealed; empty: a key of this process
    (a state sealed before a restart is refused)."""
    park_timeout_s: float = Field(default=300, gt=0, le=86_400)
    """How long a turn waits for its client's answer to one input request (an approval, a call of the
    client's model on 2026-07-28, a task's `input_required`) before it ends `cancelled` saying so."""
    token_flush_interval_s: float = Field(default=0.05, ge=0)
    """Token deltas are coalesced into one event per interval."""
    heartbeat_s: float = Field(default=10, gt=0)
    """While a call runs and nothing was sent for this long, a progress notification says what it waits on."""
    read_file_max_bytes: int = Field(default=256 * 1024, ge=1)
    mount_result_max_bytes: int = Field(default=256 * 1024, ge=1024)
    """A mounted server's result keeps at most this much text and structured content (UTF-8), with a note."""
    tool_result_max_share: float = Field(default=0.25, gt=0, le=1)
    """One tool round's results get at most this share of `context_window` (estimated tokens) in the prompt."""
    search_max_matches: int = Field(default=200, ge=1)
    instruction_files: tuple[str, ...] = ("AGENTS.md", "CLAUDE.md")
    """Project instruction file names, in order of preference: the first one a directory has is its
    instructions (the workspace root's go into the system prompt, a subdirectory's to the first tool result
    that touches it; README "Project instructions and skills"). Empty: none are read."""
    instructions_max_bytes: int = Field(default=32 * 1024, ge=256)
    """An instruction file keeps at most this much (UTF-8), with a note saying it was cut."""
    skills_dirs: tuple[Path, ...] = ()
    """Skill libraries beyond the workspace's `.agents/skills` and `.claude/skills`: each holds one folder per
    skill (`<dir>/<name>/SKILL.md`); a listed skill's folder is readable by `read_file` even outside the workspace."""
    skills_max: int = Field(default=100, ge=0, le=10_000)
    """At most this many skill folders are looked at in all (by name, per place in order); the system prompt
    says how many more there were."""
    skill_max_bytes: int = Field(default=64 * 1024, ge=1024)
    """`load_skill` returns at most this much of a SKILL.md (with a note); a skill whose front matter is not
    within its first 8 KiB is skipped."""
    search_timeout_s: float = Field(default=10.0, gt=0, le=600)
    """Time limit of one `search_text` (its regex matching included); past it the model gets an error result."""
    tools: ToolsOptions = Field(default_factory=ToolsOptions)
    openai: OpenAIOptions = Field(default_factory=OpenAIOptions)
    anthropic: AnthropicOptions = Field(default_factory=AnthropicOptions)
    models: dict[str, ModelChoice] = Field(default_factory=dict[str, ModelChoice])
    """Model aliases: a name -> a provider spec (`openai:gpt-4.1-mini`, `anthropic:...`, `script:PATH`, `sampling`),
    for named agents' `model` (Claude Code's `sonnet`, `opus`, `haiku` are mapped here)."""
    agents: dict[Annotated[str, StringConstraints(pattern=AGENT_NAME)], AgentSettings] = Field(
        default_factory=dict[str, AgentSettings]
    )
    """Named agents, over those of the workspace's `.agents/agents/` and `.claude/agents/` files."""

    @field_validator("models", mode="before")
    @classmethod
    def _parse_models(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value
        return {alias: parse_model_spec(spec) for alias, spec in cast(dict[str, object], value).items()}

    prices: dict[str, Price] = Field(default_factory=dict[str, Price])
    """Model name -> price, over the built-in table (`agent_server/llm/prices.py`) and `openai.prices`."""
    approvals: ApprovalSettings = Field(default_factory=ApprovalSettings)
    mcp_servers: dict[str, MountConfig] = Field(default_factory=dict[str, MountConfig], alias="mcpServers")
    """External MCP servers to mount, by name: the `mcpServers` entries as Claude Desktop, Cursor or VS Code
    write them, then the `mcp_config` file's; `${VAR}` expanded and every entry checked when the settings load."""
    mcp_config: Path | None = None
    """A Claude Desktop / Cursor / VS Code MCP config file whose servers are mounted as they are."""
    config_file: Path | None = None
    """The config file these settings were read from (`load_settings` sets it); hidden from sandboxed commands."""
    auth: AuthSettings | None = None
    """Bearer tokens every Streamable HTTP request must carry (`AuthSettings`), enforced on every bind; None:
    none, and then only a loopback bind is served."""
    http: HttpSettings = Field(default_factory=HttpSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    """`tracing: true` is short for `tracing: {enabled: true}` (and `false` for off)."""

    @field_validator("tracing", mode="before")
    @classmethod
    def _tracing_shorthand(cls, value: object) -> object:
        return {"enabled": value} if isinstance(value, bool) else value

    view: ViewSettings = Field(default_factory=ViewSettings)

    @field_validator("mcp_servers", mode="before")
    @classmethod
    def _parse_mounts(cls, value: object, info: ValidationInfo) -> object:
        if not isinstance(value, dict) or all(isinstance(v, MountConfig) for v in value.values()):  # pyright: ignore[reportUnknownVariableType]
            return value  # pyright: ignore[reportUnknownVariableType]
        try:
            configs = parse_mcp_servers(value, environ=_environ(info))  # pyright: ignore[reportUnknownArgumentType]
        except ConfigError as exc:
            raise ValueError(exc.message) from exc
        return {config.name: config for config in configs}

    @model_validator(mode="after")
    def _add_mcp_config_file(self, info: ValidationInfo) -> Self:
        if self.mcp_config is None:
            return self
        try:
            configs = load_mcp_config_file(self.mcp_config, environ=_environ(info))
        except ConfigError as exc:
            raise ValueError(exc.message) from exc
        if twice := sorted(set(self.mcp_servers) & {c.name for c in configs}):
            raise ValueError(f"MCP server {twice[0]!r} is configured twice (config file and --mcp-config)")
        object.__setattr__(self, "mcp_servers", {**self.mcp_servers, **{c.name: c for c in configs}})
        return self

    @field_validator("request_state_keys")
    @classmethod
    def _check_request_state_keys(cls, value: tuple[SecretStr, ...]) -> tuple[SecretStr, ...]:
        for key in value:
            if len(key.get_secret_value().encode()) < REQUEST_STATE_KEY_MIN_BYTES:
                raise ValueError(
                    f"each key must be at least {REQUEST_STATE_KEY_MIN_BYTES} bytes of secret randomness"
                    " (e.g. `openssl rand -hex 32`)"
                )
        return value

    @field_validator("store_url")
    @classmethod
    def _check_store_url(cls, value: str | None) -> str | None:
        if value is None or value == "sqlite":
            return None
        if not value.startswith(("postgresql://", "postgres://")):
            raise ValueError(
                f"unknown store {redact_url(value)!r}: expected sqlite or a URL postgresql://user:password@host/db"
            )
        return value

    @field_validator("llm", mode="before")
    @classmethod
    def _parse_llm(cls, value: object) -> object:
        return parse_model_spec(value)

    @field_validator("instruction_files")
    @classmethod
    def _check_instruction_files(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not name or "/" in name or "\\" in name or name in (".", ".."):
                raise ValueError(
                    f"{name!r} is not a file name (no directories: the file is looked up in each directory)"
                )
        return value

    @model_validator(mode="after")
    def _resolve_paths(self) -> Self:
        workspace = self.workspace.expanduser().resolve()
        object.__setattr__(self, "workspace", workspace)
        state = self.state_dir.expanduser().resolve() if self.state_dir else workspace / ".agent_server"
        object.__setattr__(self, "state_dir", state)
        object.__setattr__(self, "skills_dirs", tuple(d.expanduser().resolve() for d in self.skills_dirs))
        return self

    @property
    def state_path(self) -> Path:
        assert self.state_dir is not None  # set by the validator
        return self.state_dir


def _environ(info: ValidationInfo) -> Mapping[str, str]:
    """Where mounted servers' `${VAR}` come from: `load_settings(environ=...)`, else the process environment."""
    context = cast(Mapping[str, object], info.context or {})
    environ = context.get("environ")
    return cast(Mapping[str, str], environ) if isinstance(environ, Mapping) else os.environ


def read_config_file(path: Path) -> dict[str, Any]:
    """Parse a JSON or TOML config file into a dict.

    Raises:
        ConfigError: the file is missing, unreadable or malformed.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    try:
        data: object = _parse_toml(text) if path.suffix == ".toml" else json.loads(text)
    except ValueError as exc:  # json.JSONDecodeError and tomllib.TOMLDecodeError both are
        raise ConfigError(f"config file {path} is not valid {path.suffix.lstrip('.') or 'JSON'}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold an object at the top level")
    return data  # pyright: ignore[reportUnknownVariableType]


def _parse_toml(text: str) -> dict[str, object]:
    import tomllib  # only when a TOML file is given: keeps the start path light

    return tomllib.loads(text)


def load_settings(
    *,
    config_file: Path | None = None,
    overrides: dict[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Merge the config file and explicit overrides (None values ignored) into Settings.

    Raises:
        ConfigError: a value is invalid; the message names the field.
    """
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = read_config_file(config_file) if config_file else {}
    if config_file:
        _resolve_relative_to(values, config_file.parent)
    _merge(values, {"store_url": environ.get(STORE_ENV) or None})  # over the file, under the flags
    _merge(values, overrides or {})
    if config_file:
        values["config_file"] = str(config_file.expanduser().resolve())
    try:
        return Settings.model_validate(values, context={"environ": environ})
    except ValidationError as exc:
        problems = "; ".join(_problem(e["loc"], e["msg"]) for e in exc.errors())
        raise ConfigError(f"invalid settings: {problems}") from exc


def _merge(values: dict[str, Any], overrides: Mapping[str, Any]) -> None:
    """Overrides (None ignored) into `values`; a nested object (`tools`) is merged key by key, not replaced."""
    for key, value in overrides.items():
        current = values.get(key)
        if isinstance(value, Mapping) and isinstance(current, dict):
            merged = dict(cast(dict[str, Any], current))
            _merge(merged, cast(Mapping[str, Any], value))
            values[key] = merged
        elif isinstance(value, Mapping):
            given = {k: v for k, v in cast(Mapping[str, Any], value).items() if v is not None}
            if given:
                values[key] = given
        elif value is not None:
            values[key] = value


def _problem(loc: tuple[int | str, ...], message: str) -> str:
    where = ".".join(str(part) for part in loc)
    message = message.removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def _resolve_relative_to(values: dict[str, Any], base: Path) -> None:
    """Paths in a config file are relative to the file, not to the current directory."""
    for key in ("workspace", "state_dir", "mcp_config"):
        if isinstance(values.get(key), str):
            values[key] = str((base / values[key]).expanduser())
    skills_dirs = values.get("skills_dirs")
    if isinstance(skills_dirs, list):
        values["skills_dirs"] = [
            str(base / Path(d).expanduser()) if isinstance(d, str) else d for d in cast(list[Any], skills_dirs)
        ]
    auth = values.get("auth")
    if isinstance(auth, dict):
        tokens_file = cast(dict[str, Any], auth).get("tokens_file")
        if isinstance(tokens_file, str):
            values["auth"] = {**cast(dict[str, Any], auth), "tokens_file": str((base / tokens_file).expanduser())}
    models = values.get("models")
    if isinstance(models, dict):
        values["models"] = {
            alias: "script:" + str(base / spec.removeprefix("script:"))
            if isinstance(spec, str) and spec.startswith("script:")
            else spec
            for alias, spec in cast(dict[str, Any], models).items()
        }
    llm = values.get("llm")
    if isinstance(llm, str) and llm.startswith("script:"):
        values["llm"] = "script:" + str(base / llm.removeprefix("script:"))
    elif isinstance(llm, dict) and llm.get("kind") == "script" and isinstance(llm.get("path"), str):  # pyright: ignore[reportUnknownMemberType]
        values["llm"] = {**llm, "path": str(base / llm["path"])}  # pyright: ignore[reportUnknownArgumentType]
