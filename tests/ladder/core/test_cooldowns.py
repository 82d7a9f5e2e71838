"""Cooldowns: backoff, Retry-After and the clamp to the reset."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from ladder.core import CooldownChange, apply_event, backoff_seconds, clamp_cooldown_to_reset
from tests.ladder.core.factories import CONFIG, NOW


def test_backoff_sequence_doubles_up_to_the_cap() -> None:
    assert [backoff_seconds(n, CONFIG) for n in range(1, 8)] == [5, 10, 20, 40, 80, 120, 120]


def test_backoff_survives_a_very_long_failure_streak() -> None:
    assert backoff_seconds(5000, CONFIG) == 120.0


def test_backoff_refuses_a_zeroth_failure() -> None:
    with pytest.raises(ValueError, match="consecutive_failures must be >= 1"):
        backoff_seconds(0, CONFIG)


@pytest.mark.parametrize(
    ("reset_at", "expected"),
    [
        pytest.param(NOW + timedelta(seconds=30), NOW + timedelta(seconds=30), id="shortens"),
        pytest.param(
            "2026-11-29T12:00:30Z", NOW + timedelta(seconds=30), id="shortens-from-iso-string"
        ),
        pytest.param(
            "2026-11-29T13:00:30+01:00", NOW + timedelta(seconds=30), id="offset-string-to-utc"
        ),
        pytest.param(
            NOW + timedelta(seconds=90), NOW + timedelta(seconds=60), id="never-lengthens"
        ),
        pytest.param(None, NOW + timedelta(seconds=60), id="absent"),
        pytest.param("soon-ish", NOW + timedelta(seconds=60), id="unparseable"),
        pytest.param("2026-11-29T12:00:30", NOW + timedelta(seconds=60), id="naive-string"),
        pytest.param(
            datetime(2026, 11, 29, 12, 0, 30), NOW + timedelta(seconds=60), id="naive-datetime"
        ),
        pytest.param(NOW - timedelta(seconds=5), NOW + timedelta(seconds=60), id="already-past"),
        pytest.param(NOW, NOW + timedelta(seconds=60), id="exactly-now"),
    ],
)
def test_clamp_cooldown_to_reset(reset_at: datetime | str | None, expected: datetime) -> None:
    cooldown_until = NOW + timedelta(seconds=60)

    assert clamp_cooldown_to_reset(cooldown_until, reset_at, NOW) == expected


@pytest.mark.parametrize("kind", ["rate_limited", "quota_exhausted", "error"])
def test_a_failure_counts_and_backs_off(kind: str) -> None:
    change = apply_event(
        kind,
        consecutive_failures=2,
        retry_after_seconds=None,
        reset_at=None,
        config=CONFIG,
        now=NOW,
    )

    assert change == CooldownChange(NOW + timedelta(seconds=20), 20.0, False, 3)


def test_retry_after_is_used_as_given_without_the_cap() -> None:
    change = apply_event(
        "rate_limited",
        consecutive_failures=0,
        retry_after_seconds=300.0,
        reset_at=None,
        config=CONFIG,
        now=NOW,
    )

    assert change == CooldownChange(NOW + timedelta(seconds=300), 300.0, False, 1)


def test_a_cooldown_is_clamped_to_the_reset_after_retry_after() -> None:
    change = apply_event(
        "quota_exhausted",
        consecutive_failures=0,
        retry_after_seconds=3600.0,
        reset_at=NOW + timedelta(seconds=45),
        config=CONFIG,
        now=NOW,
    )

    assert change == CooldownChange(NOW + timedelta(seconds=45), 45.0, True, 1)


def test_a_past_reset_does_not_clamp_the_backoff() -> None:
    change = apply_event(
        "rate_limited",
        consecutive_failures=5,
        retry_after_seconds=None,
        reset_at=NOW - timedelta(seconds=10),
        config=CONFIG,
        now=NOW,
    )

    assert change == CooldownChange(NOW + timedelta(seconds=120), 120.0, False, 6)


@pytest.mark.parametrize(
    "retry_after",
    [pytest.param(-5.0, id="negative"), pytest.param(float("nan"), id="nan")],
)
def test_a_garbage_retry_after_falls_back_to_backoff(retry_after: float) -> None:
    change = apply_event(
        "rate_limited",
        consecutive_failures=0,
        retry_after_seconds=retry_after,
        reset_at=None,
        config=CONFIG,
        now=NOW,
    )

    assert change == CooldownChange(NOW + timedelta(seconds=5), 5.0, False, 1)


def test_a_success_clears_the_failures_and_the_cooldown() -> None:
    change = apply_event(
        "success",
        consecutive_failures=4,
        retry_after_seconds=30.0,
        reset_at=NOW + timedelta(seconds=10),
        config=CONFIG,
        now=NOW,
    )

    assert change == CooldownChange(None, 0.0, False, 0)


def test_an_unknown_event_kind_is_refused() -> None:
    with pytest.raises(
        ValueError,
        match="unknown event kind 'exploded': known kinds are rate_limited, quota_exhausted, ",
    ):
        apply_event(
            "exploded",
            consecutive_failures=0,
            retry_after_seconds=None,
            reset_at=None,
            config=CONFIG,
            now=NOW,
        )
