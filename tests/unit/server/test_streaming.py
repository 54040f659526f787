"""Whether a request's events can reach its caller, and so whether its turn builds any (`EventStreamer.listening`)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import mcp_types as types
import pytest

from agent_server.events import listening
from agent_server.server.streaming import EVENTS_EXTENSION, EventStreamer, progress_reaches_caller, serving_stdio

pytestmark = pytest.mark.anyio

WITH_TOKEN: dict[str, Any] = {"name": "run_turn", "arguments": {}, "_meta": {"progressToken": 7}}
WITHOUT_TOKEN: dict[str, Any] = {"name": "run_turn", "arguments": {}}


def request(params: dict[str, Any], *, http: bool = False, events_extension: bool = False) -> Any:
    extensions: dict[str, dict[str, Any]] | None = {EVENTS_EXTENSION: {}} if events_extension else None
    caps = types.ClientCapabilities(extensions=extensions)
    return cast(
        Any,
        SimpleNamespace(
            params=params,
            request_id=1,
            request=object() if http else None,
            session=SimpleNamespace(client_capabilities=caps),
        ),
    )


def test_over_a_wire_only_a_request_with_a_progress_token_can_be_told_progress() -> None:
    with serving_stdio():
        assert progress_reaches_caller(request(WITH_TOKEN))
        assert not progress_reaches_caller(request(WITHOUT_TOKEN))
    assert progress_reaches_caller(request(WITH_TOKEN, http=True))
    assert not progress_reaches_caller(request(WITHOUT_TOKEN, http=True))


def test_in_process_a_request_may_always_be_told_progress() -> None:
    """The SDK's in-process dispatcher holds the caller's progress callback outside the request."""
    assert progress_reaches_caller(request(WITHOUT_TOKEN))


async def test_a_turn_over_a_wire_without_a_token_or_the_events_extension_has_nobody_listening() -> None:
    with serving_stdio():
        quiet = EventStreamer(request(WITHOUT_TOKEN), flush_interval=0.05)
        full = EventStreamer(request(WITHOUT_TOKEN, events_extension=True), flush_interval=0.05)
        told = EventStreamer(request(WITH_TOKEN), flush_interval=0.05)
    assert not listening(quiet)
    assert listening(full) and listening(told)
