"""One classification of exceptions for every door, and one logging rule: what each door then answers."""

from __future__ import annotations

import logging

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from agent_server.acp.errors import request_error
from agent_server.doors.errors import classify
from agent_server.errors import ConfigError, InvalidArgument, ModelError, SessionNotFound, StoreError, TurnNotFound
from agent_server.server.tool_kit import error_result


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    limit: int


def _invalid() -> ValidationError:
    try:
        _Params.model_validate({"limit": "many", "lmit": 1})
    except ValidationError as exc:
        return exc
    raise AssertionError("validated")


@pytest.mark.parametrize(
    ("exc", "kind", "error_type", "acp_code"),
    [
        (SessionNotFound("ses_x"), "not_found", "session_not_found", -32002),
        (TurnNotFound("ses_x", "turn_y"), "not_found", "turn_not_found", -32002),
        (InvalidArgument("bad cursor"), "invalid", "invalid_argument", -32602),
        (ConfigError("bad mount"), "invalid", "config_error", -32602),
        (StoreError("disk full"), "internal", "store_error", -32603),
        (ModelError("provider down"), "internal", "model_error", -32603),
    ],
)
def test_each_known_error_keeps_its_type_and_message_on_both_doors(
    exc: Exception, kind: str, error_type: str, acp_code: int, caplog: pytest.LogCaptureFixture
) -> None:
    error = classify(exc, doing="session_get")
    assert (error.kind, error.type) == (kind, error_type)
    mcp = error_result("session_get", exc)
    acp = request_error(exc, "session/load")
    assert mcp.is_error and mcp.structured_content == {"error": {"type": error_type, "message": error.message}}
    assert (acp.code, acp.data, str(acp)) == (acp_code, {"type": error_type}, error.message)
    assert not caplog.records, "a known error is the caller's to read, not the log's"


def test_invalid_arguments_are_described_field_by_field() -> None:
    error = classify(_invalid(), doing="session_list")
    assert (error.kind, error.type) == ("invalid", "invalid_argument")
    assert error.message == (
        "invalid arguments for session_list: limit: Input should be a valid integer, unable to parse string as an "
        "integer; lmit: unknown argument"
    )


def test_an_unexpected_exception_is_logged_once_and_named_without_internals(caplog: pytest.LogCaptureFixture) -> None:
    secret = RuntimeError("the token is hunter2")
    with caplog.at_level(logging.ERROR, logger="agent_server"):
        mcp = error_result("run_turn", secret)
        acp = request_error(secret, "session/prompt")
    assert [r.exc_info[1] for r in caplog.records if r.exc_info] == [secret, secret]  # once per door's answer
    assert mcp.structured_content == {
        "error": {"type": "internal_error", "message": "internal error in run_turn; see the agent server's log"}
    }
    assert (acp.code, acp.data) == (-32603, {"type": "internal_error"})
    assert "hunter2" not in str(acp) and "hunter2" not in str(mcp.structured_content)
