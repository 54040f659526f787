"""`utc_now`: the record's timestamps spelled as `datetime.isoformat` spells them, the second's part kept fresh."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from agent_server.types import utc_now


def test_now_is_spelled_as_isoformat_in_milliseconds_and_lies_between_two_clock_readings() -> None:
    before = datetime.now(UTC) - timedelta(milliseconds=1)  # the stamp is cut to the millisecond
    stamp = utc_now()
    after = datetime.now(UTC)
    parsed = datetime.fromisoformat(stamp)
    assert stamp == parsed.isoformat(timespec="milliseconds")
    assert before <= parsed <= after


@pytest.mark.parametrize(
    "clock",
    [
        [1764700000.999, 1764700001.0, 1764700001.5004],  # across a second: the cached part moves on
        [1764700001.5, 1764700000.25],  # a clock set back
    ],
)
def test_each_reading_is_the_clocks_own(monkeypatch: pytest.MonkeyPatch, clock: list[float]) -> None:
    readings = iter(clock)
    monkeypatch.setattr(time, "time", lambda: next(readings))
    stamps = [utc_now() for _ in clock]
    expected = [datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds") for t in clock]
    assert stamps == expected
