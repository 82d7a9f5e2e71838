"""`next_change_at` for `reset_passed` and `quota_stale`: the instant the refresh already
due is expected (the reset-time refresh, else the next beat tick counted from when it
was due), stable within a beat period, and `valid_until` ends at that tick only for
`auto/subscription` (thrifty admits such readings: nothing in it moves)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from ladder.core import decide
from ladder.core.quota import refresh_expected_at
from tests.ladder.core.factories import CONFIG, NOW, SUBSCRIPTION, THRIFTY, pinned, reading, view


def _decide(auto_id, quota, now):
    connections = {"plan": view("plan", quota=quota)}
    return decide(auto_id, [pinned("plan")], connections, {}, {}, CONFIG, now)


def test_just_after_a_reset_the_reset_time_refresh_is_expected() -> None:
    # NOW is 12:00; the reset was at 11:59:59.5, the refresh is due 1.5 s after it.
    quota = reading(40.0, age_seconds=60, reset_at=NOW - timedelta(milliseconds=500))
    decision = _decide(SUBSCRIPTION, quota, NOW)
    assert [e.reason.value for e in decision.excluded] == ["reset_passed"]
    assert decision.next_change_at == datetime(2026, 11, 29, 12, 0, 1, tzinfo=UTC)
    assert decision.valid_until == decision.next_change_at


def test_an_overdue_refresh_is_expected_at_the_next_beat_tick_and_holds_within_it() -> None:
    quota = reading(40.0, age_seconds=300)  # stale since 11:58:00 (180 s maximum)
    ticks = [
        _decide(SUBSCRIPTION, quota, NOW + timedelta(seconds=s)).next_change_at
        for s in (0, 1, 9.999, 10, 10.5)
    ]
    # Counted from 11:58:00 in 10 s beats: 12:00:10 until that instant, then 12:00:20.
    at_10 = datetime(2026, 11, 29, 12, 0, 10, tzinfo=UTC)
    at_20 = datetime(2026, 11, 29, 12, 0, 20, tzinfo=UTC)
    assert ticks == [at_10, at_10, at_10, at_20, at_20]
    assert _decide(SUBSCRIPTION, quota, NOW).valid_until == at_10


def test_the_beat_period_comes_from_the_config() -> None:
    quota = reading(40.0, age_seconds=300)
    config = dataclasses.replace(CONFIG, beat_seconds=45.0)
    max_age = timedelta(seconds=config.max_state_age_seconds)
    # Due at 11:58:00; 45 s beats: 11:58:45, 11:59:30, 12:00:15.
    assert refresh_expected_at(quota, config, NOW, max_age) == datetime(
        2026, 11, 29, 12, 0, 15, tzinfo=UTC
    )
    assert refresh_expected_at(reading(40.0), config, NOW, max_age) is None


def test_thrifty_admits_the_reading_and_keeps_its_validity() -> None:
    quota = reading(40.0, age_seconds=300, reset_at=NOW + timedelta(hours=1))
    decision = _decide(THRIFTY, quota, NOW)
    assert decision.excluded == ()
    assert decision.next_change_at is None
    assert decision.valid_until == NOW + timedelta(hours=1)
