"""`ScriptedLLM`: a deterministic model that replays a JSON script of responses.

For tests, demos and users' own CI (`--llm script:PATH`). The script is a file
`{"responses": [...]}`; each response is one model call, answered in order:

```json
{"responses": [
  {"content": "Let me look.", "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
  {"expect_contains": "a.txt", "content": "It says hello.", "usage": {"prompt_tokens": 50, "completion_tokens": 5}},
  {"delay_s": 2, "error": {"message": "provider down"}}
]}
```

Fields of a response (any other key is rejected when the script is loaded):

- `content`: the answer text, streamed to `on_text` in a few chunks.
- `tool_calls`: `[{"name", "arguments", "id"?}]`. `id` defaults to `call_<n>`, n counting from 1
  the tool calls the script has answered with so far (written ids count too). `arguments` is an
  object or a JSON string; a string that is not a JSON object gives a `ToolCall` with
  `arguments={}` and `arguments_error` set.
- `reasoning`: the model's reasoning text.
- `stop_reason`: why the model stopped, in the record's vocabulary (`end_turn`, `tool_use`, `max_tokens`,
  `stop_sequence`, `content_filter`, `pause_turn`); by default `tool_use` with tool calls, else `end_turn`.
  `max_tokens` plays an answer (or a tool call) cut at the token limit.
- `usage`: `{"prompt_tokens", "completion_tokens"}`; the total is their sum. Zero when absent. Optionally
  `cache_read_tokens`, `cache_write_tokens` (parts of `prompt_tokens`) and `reasoning_tokens` (part of
  `completion_tokens`); unknown when absent.
- `delay_s`: seconds to wait (cancellable) before answering.
- `error`: `{"message"}`: the call raises `ModelError` with that message, after the delay and after
  streaming any `content` (which simulates a stream that broke mid-answer). A response with `error`
  may not also carry `tool_calls`, `reasoning` or `usage`.
- `expect_contains`: a string or list of strings that must each appear in the request's messages
  (their JSON form or their plain text); otherwise the call raises `ModelError` naming them.

A response is consumed when its call starts (before the delay, so a cancelled slow call is not
replayed by the next one). What a call after the last response gets is the script file's optional
top-level `"when_exhausted"`:

- `"fail"` (the default): `ModelError("script exhausted: ...")`, naming this option. Tests want
  this: a script that runs out means the code under test made more model calls than it should.
- `"repeat_last"`: the last response again, for every further call. Inside a host (an editor, the
  Inspector, a chat) a script whose last response is a plain answer then keeps answering.
- `"cycle"`: start over from the first response, so a tool round followed by an answer is
  replayed turn after turn.

`expect_contains` and `delay_s` apply to every replay; generated tool call ids keep counting, so
they stay unique across replays. `"repeat_last"` and `"cycle"` need at least one response.
"""

import json
import re
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Self, cast, get_args

import anyio
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from agent_server.errors import ConfigError, ModelError
from agent_server.llm.base import ModelRequest, ModelResponse, RetryCallback, TextCallback
from agent_server.nesting import MAX_ARGUMENT_DEPTH, NestedTooDeep, loads_bounded
from agent_server.types import StopReason, ToolCall, Usage

STREAM_CHUNK_CHARS = 16
CALLS_KEPT = 1000
"""How many requests `ScriptedLLM.calls` keeps (the newest)."""
"""Streamed chunks are runs of whole words of at least this many characters (the last may be shorter)."""


ExhaustionPolicy = Literal["fail", "repeat_last", "cycle"]
"""What a call after the last response gets: an error, the last response again, or the first again."""

EXHAUSTION_POLICIES: tuple[str, ...] = get_args(ExhaustionPolicy)
_EXHAUSTED_HINT = (
    'add responses, or set the script file\'s top-level "when_exhausted" to "repeat_last" '
    '(answer with the last response again) or "cycle" (start over from the first)'
)


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ScriptedToolCall(_Strict):
    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict[str, Any])
    id: str | None = None


class ScriptedUsage(_Strict):
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    cache_read_tokens: int | None = Field(default=None, ge=0)
    cache_write_tokens: int | None = Field(default=None, ge=0)
    reasoning_tokens: int | None = Field(default=None, ge=0)


class ScriptedError(_Strict):
    message: str


class ScriptedResponse(_Strict):
    """One entry of a script, as written in the file."""

    content: str = ""
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list[ScriptedToolCall])
    reasoning: str | None = None
    stop_reason: StopReason | None = None
    usage: ScriptedUsage | None = None
    delay_s: float = Field(default=0.0, ge=0)
    error: ScriptedError | None = None
    expect_contains: str | list[str] | None = None

    @model_validator(mode="after")
    def _error_stands_alone(self) -> Self:
        extras = (self.tool_calls, self.reasoning is not None, self.usage is not None, self.stop_reason is not None)
        if self.error is not None and any(extras):
            raise ValueError(
                "a response with `error` cannot also have `tool_calls`, `reasoning`, `usage` or `stop_reason`"
            )
        return self


_RESPONSES_ADAPTER: TypeAdapter[list[ScriptedResponse]] = TypeAdapter(list[ScriptedResponse])


class _Step:
    """A validated response turned into what `complete` needs.

    The `ModelResponse` is built when the step is used, not when the script loads, so that
    loading a script at startup does not build the conversation models (start-up cost).
    """

    def __init__(self, index: int, entry: ScriptedResponse) -> None:
        self.index = index
        self.entry = entry
        expected = entry.expect_contains
        self.expect: tuple[str, ...] = (expected,) if isinstance(expected, str) else tuple(expected or ())

    def response(self, call_ids: list[str], model: str) -> ModelResponse:
        entry = self.entry
        usage = entry.usage or ScriptedUsage()
        return ModelResponse(
            model=model,
            text=entry.content,
            tool_calls=[_tool_call(spec, call_id) for spec, call_id in zip(entry.tool_calls, call_ids, strict=True)],
            reasoning=entry.reasoning,
            stop_reason=entry.stop_reason or ("tool_use" if entry.tool_calls else "end_turn"),
            usage=Usage(
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                total_tokens=usage.prompt_tokens + usage.completion_tokens,
                cache_read_tokens=usage.cache_read_tokens,
                cache_write_tokens=usage.cache_write_tokens,
                reasoning_tokens=usage.reasoning_tokens,
            ),
        )


class ScriptedLLM:
    """An `LLMClient` that answers from a script, in order.

    Attributes:
        calls: the requests seen, in order, including those that then failed (the last `CALLS_KEPT`:
            a script that repeats or cycles can serve a long-running server).
    """

    name = "script"

    def __init__(
        self,
        responses: Sequence[Mapping[str, Any] | ScriptedResponse],
        *,
        source: str = "script",
        when_exhausted: ExhaustionPolicy = "fail",
    ) -> None:
        """Validate the responses.

        Raises:
            ConfigError: a response is malformed (the message names its index and the bad key), or
                `when_exhausted` asks to replay an empty script.
        """
        try:
            entries = _RESPONSES_ADAPTER.validate_python(list(responses))
        except ValidationError as exc:
            raise ConfigError(f"invalid {source}: {_describe(exc)}") from exc
        if when_exhausted != "fail" and not entries:
            raise ConfigError(f'invalid {source}: "when_exhausted": "{when_exhausted}" needs at least one response')
        self.source = source
        self.when_exhausted: ExhaustionPolicy = when_exhausted
        self.total = len(entries)
        self.calls: deque[ModelRequest] = deque(maxlen=CALLS_KEPT)
        self._steps = [_Step(index, entry) for index, entry in enumerate(entries)]
        self._used = 0  # model calls answered (or failed) so far
        self._tool_calls = 0  # tool calls answered so far, for the generated ids

    @classmethod
    def from_file(cls, path: Path | str) -> "ScriptedLLM":
        """Load a script file `{"responses": [...]}`.

        Raises:
            ConfigError: the file is missing, unreadable, not JSON, or not a valid script.
        """
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise ConfigError(f"cannot read script file {path}: {reason}") from exc
        try:
            data: object = loads_bounded(text)
        except NestedTooDeep as exc:  # deep arguments can be written as a JSON string instead
            raise ConfigError(f"script file {path} is {exc}: write deep arguments as a JSON string") from exc
        except ValueError as exc:
            raise ConfigError(f"script file {path} is not valid JSON: {exc}") from exc
        responses = cast(dict[str, Any], data).get("responses") if isinstance(data, dict) else None
        if not isinstance(responses, list):
            raise ConfigError(f'script file {path} must hold an object {{"responses": [...]}}')
        top = cast(dict[str, Any], data)
        extra = sorted(key for key in top if key not in ("responses", "when_exhausted"))
        if extra:
            raise ConfigError(f"script file {path}: unknown top-level key(s) {', '.join(map(repr, extra))}")
        policy = _exhaustion_policy(top.get("when_exhausted", "fail"), f"script file {path}")
        return cls(cast(list[Any], responses), source=f"script file {path}", when_exhausted=policy)

    @property
    def remaining(self) -> int:
        """How many responses have not been used yet (replays do not count)."""
        return max(0, self.total - self._used)

    def assert_complete(self) -> None:
        """Fail a test that left responses unused."""
        if self.remaining:
            raise AssertionError(f"{self.remaining} of {self.total} scripted responses were not used")

    async def complete(
        self, request: ModelRequest, *, on_text: TextCallback | None = None, on_retry: RetryCallback | None = None
    ) -> ModelResponse:
        """Answer with the next response of the script.

        Raises:
            ModelError: the script is exhausted (with `"when_exhausted": "fail"`), the request
                lacks an expected string, or the response is a scripted error.
        """
        self.calls.append(request)
        step = self._next_step()
        if step is None:
            raise ModelError(f"script exhausted: all {self.total} responses used ({self.source}); {_EXHAUSTED_HINT}")
        response = step.response(self._next_call_ids(step), request.model or self.name)
        _check_expectations(step, request)
        if step.entry.delay_s > 0:
            await anyio.sleep(step.entry.delay_s)
        if on_text is not None:
            for chunk in stream_chunks(response.text):
                await on_text(chunk)
        if step.entry.error is not None:
            raise ModelError(step.entry.error.message)
        return response

    def _next_step(self) -> _Step | None:
        """The step for this call, consumed; None when the script is exhausted and should fail."""
        if self._used < self.total:
            step = self._steps[self._used]
        elif self.when_exhausted == "repeat_last":
            step = self._steps[-1]
        elif self.when_exhausted == "cycle":
            step = self._steps[self._used % self.total]
        else:
            return None
        self._used += 1
        return step

    def _next_call_ids(self, step: _Step) -> list[str]:
        ids: list[str] = []
        for spec in step.entry.tool_calls:
            self._tool_calls += 1
            ids.append(spec.id or f"call_{self._tool_calls}")
        return ids


def stream_chunks(text: str, size: int = STREAM_CHUNK_CHARS) -> list[str]:
    """Split text into runs of whole words of about `size` characters; they join back to `text`."""
    chunks: list[str] = []
    current = ""
    for word in re.findall(r"\s*\S+\s*|\s+", text):
        current += word
        if len(current) >= size:
            chunks.append(current)
            current = ""
    if current:
        chunks.append(current)
    return chunks


def _exhaustion_policy(value: object, source: str) -> ExhaustionPolicy:
    if value not in EXHAUSTION_POLICIES:
        choices = ", ".join(f'"{policy}"' for policy in EXHAUSTION_POLICIES)
        raise ConfigError(f'{source}: "when_exhausted" must be one of {choices}, not {json.dumps(value)}')
    return cast(ExhaustionPolicy, value)


def _tool_call(spec: ScriptedToolCall, call_id: str) -> ToolCall:
    if isinstance(spec.arguments, dict):
        return ToolCall(id=call_id, name=spec.name, arguments=spec.arguments)
    try:
        parsed: object = loads_bounded(spec.arguments, MAX_ARGUMENT_DEPTH)
    except NestedTooDeep as exc:
        return ToolCall(id=call_id, name=spec.name, arguments_error=f"arguments are {exc}")
    except ValueError as exc:
        return ToolCall(id=call_id, name=spec.name, arguments_error=f"arguments are not valid JSON: {exc}")
    if not isinstance(parsed, dict):
        kind = type(parsed).__name__
        return ToolCall(id=call_id, name=spec.name, arguments_error=f"arguments must be a JSON object, not {kind}")
    return ToolCall(id=call_id, name=spec.name, arguments=parsed)  # pyright: ignore[reportUnknownArgumentType]


def _check_expectations(step: _Step, request: ModelRequest) -> None:
    if not step.expect:
        return
    dumped = json.dumps([m.model_dump(mode="json") for m in request.messages], ensure_ascii=False)
    plain = "\n".join(m.text() for m in request.messages)
    missing = [s for s in step.expect if s not in dumped and s not in plain]
    if missing:
        names = ", ".join(repr(s) for s in missing)
        raise ModelError(f"script response {step.index}: the request does not contain {names}")


def _describe(exc: ValidationError) -> str:
    """`response 2: unknown key 'foo'; response 3: tool_calls.0.name: Field required`."""
    problems: dict[str, list[str]] = {}
    for error in exc.errors():
        loc = list(error["loc"])
        where = f"response {loc.pop(0)}" if loc and isinstance(loc[0], int) else "responses"
        # A union field (`arguments`, `expect_contains`) reports each alternative under its type's name.
        loc = [part for part in loc if not (isinstance(part, str) and part.startswith(("str", "list[", "dict[")))]
        if error["type"] == "extra_forbidden" and loc:
            key = loc.pop()
            where += f": {'.'.join(map(str, loc))}" if loc else ""
            problems.setdefault(where, []).append(f"unknown key {key!r}")
        else:
            where += f": {'.'.join(map(str, loc))}" if loc else ""
            problems.setdefault(where, []).append(error["msg"])
    return "; ".join(f"{where}: {' or '.join(dict.fromkeys(msgs))}" for where, msgs in problems.items())
