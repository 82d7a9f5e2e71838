"""Quota rules: staleness, usability and hysteresis of one connection."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from ladder.core import (
    NEVER_READ,
    Hysteresis,
    HysteresisState,
    LadderConfig,
    QuotaStatus,
    Reading,
    Staleness,
    WindowReading,
    binding_window,
    hysteresis_after,
    is_quota_usable,
    is_reading_current,
    reading_staleness,
)
from tests.ladder.core.factories import CONFIG, DROPPED, NOW, reading

IN_1H = NOW + timedelta(hours=1)
IN_2H = NOW + timedelta(hours=2)


def window(name: str, remaining: float | None, reset_at: datetime | None) -> WindowReading:
    return WindowReading(name=name, remaining_percent=remaining, reset_at=reset_at)


@pytest.mark.parametrize(
    ("windows", "expected"),
    [
        pytest.param([], (None, None), id="no-windows"),
        pytest.param([window("a", None, IN_1H)], (None, None), id="all-unknown"),
        pytest.param(
            [window("a", 40.0, IN_1H), window("b", 10.0, IN_2H)], (10.0, IN_2H), id="lowest-wins"
        ),
        pytest.param(
            [window("a", 10.0, IN_1H), window("b", 10.0, IN_2H)],
            (10.0, IN_2H),
            id="tie-later-reset",
        ),
        pytest.param(
            [window("a", 10.0, IN_2H), window("b", 10.0, IN_1H)],
            (10.0, IN_2H),
            id="tie-later-reset-first",
        ),
        pytest.param(
            [window("a", 10.0, None), window("b", 10.0, IN_1H)],
            (10.0, IN_1H),
            id="tie-known-reset-beats-none",
        ),
        pytest.param(
            [window("a", None, IN_1H), window("b", 55.0, None)], (55.0, None), id="unknown-ignored"
        ),
    ],
)
def test_binding_window_picks_lowest_remaining(
    windows: list[WindowReading], expected: tuple[float | None, datetime | None]
) -> None:
    assert binding_window(windows) == expected


def test_a_fresh_reading_is_current() -> None:
    assert is_reading_current(reading(age_seconds=180), CONFIG, NOW) is True


def test_a_reading_older_than_the_maximum_is_too_old() -> None:
    old = reading(age_seconds=181)

    assert (is_reading_current(old, CONFIG, NOW), reading_staleness(old, CONFIG, NOW)) == (
        False,
        Staleness.TOO_OLD,
    )


def test_a_reading_whose_reset_passed_is_stale_regardless_of_age() -> None:
    young = reading(age_seconds=1, reset_at=NOW - timedelta(seconds=1))
    old = reading(age_seconds=3600, reset_at=NOW - timedelta(seconds=1))

    assert reading_staleness(young, CONFIG, NOW) is Staleness.RESET_PASSED
    assert reading_staleness(old, CONFIG, NOW) is Staleness.RESET_PASSED


def test_a_reset_exactly_now_has_passed() -> None:
    assert reading_staleness(reading(reset_at=NOW), CONFIG, NOW) is Staleness.RESET_PASSED


def test_an_exhausted_reading_with_a_future_reset_stays_current_even_when_old() -> None:
    dead = reading(
        0.0, status=QuotaStatus.EXHAUSTED, age_seconds=7200, reset_at=NOW + timedelta(hours=1)
    )

    assert is_reading_current(dead, CONFIG, NOW) is True


def test_an_exhausted_reading_without_a_reset_ages_like_any_other() -> None:
    dead = reading(0.0, status=QuotaStatus.EXHAUSTED, age_seconds=181)

    assert reading_staleness(dead, CONFIG, NOW) is Staleness.TOO_OLD


def test_an_old_safe_reading_with_a_future_reset_is_too_old() -> None:
    old = reading(50.0, age_seconds=181, reset_at=NOW + timedelta(hours=1))

    assert reading_staleness(old, CONFIG, NOW) is Staleness.TOO_OLD


@pytest.mark.parametrize(
    ("quota", "hysteresis", "admit_unknown", "expected"),
    [
        pytest.param(None, NEVER_READ, False, False, id="never-read-closed"),
        pytest.param(None, NEVER_READ, True, True, id="never-read-open"),
        pytest.param(reading(3.0), NEVER_READ, False, True, id="in-play-above-cutoff"),
        pytest.param(reading(3.0), DROPPED, True, False, id="dropped-below-floor"),
        pytest.param(reading(2.0), NEVER_READ, True, False, id="at-cutoff"),
        pytest.param(
            reading(None, status=QuotaStatus.EXHAUSTED), NEVER_READ, True, False, id="exhausted"
        ),
    ],
)
def test_is_quota_usable(
    quota: Reading | None, hysteresis: Hysteresis, admit_unknown: bool, expected: bool
) -> None:
    assert is_quota_usable(quota, hysteresis, CONFIG, NOW, admit_unknown=admit_unknown) is expected


IN_PLAY_EARLIER = Hysteresis(HysteresisState.IN_PLAY, NOW - timedelta(hours=2), "60.0 % left")


@pytest.mark.parametrize(
    ("previous", "new_reading", "expected"),
    [
        pytest.param(
            NEVER_READ,
            reading(3.0),
            NEVER_READ,
            id="3-percent-stays-in-play",
        ),
        pytest.param(
            IN_PLAY_EARLIER,
            reading(2.0),
            Hysteresis(
                HysteresisState.DROPPED_OUT, NOW, "2.0 % left, at or below the exit cutoff of 2 %"
            ),
            id="at-cutoff-drops-out",
        ),
        pytest.param(
            IN_PLAY_EARLIER,
            reading(40.0, status=QuotaStatus.EXHAUSTED),
            Hysteresis(
                HysteresisState.DROPPED_OUT,
                NOW,
                "Upstream reported EXHAUSTED, 40.0 % left; re-entry needs more than 5 %",
            ),
            id="exhausted-drops-out-whatever-remaining",
        ),
        pytest.param(DROPPED, reading(3.0), DROPPED, id="3-percent-after-drop-stays-out"),
        pytest.param(DROPPED, reading(5.0), DROPPED, id="at-floor-stays-out"),
        pytest.param(
            DROPPED,
            reading(6.0),
            Hysteresis(HysteresisState.IN_PLAY, NOW, "6.0 % left, above the re-entry floor of 5 %"),
            id="6-percent-re-enters",
        ),
        pytest.param(
            DROPPED,
            reading(0.0, status=QuotaStatus.EXHAUSTED),
            DROPPED,
            id="exhausted-again-keeps-since",
        ),
        pytest.param(IN_PLAY_EARLIER, reading(None), IN_PLAY_EARLIER, id="unknown-remaining"),
        pytest.param(
            DROPPED, reading(None, status=QuotaStatus.UNKNOWN), DROPPED, id="unknown-keeps-out"
        ),
        pytest.param(
            IN_PLAY_EARLIER,
            reading(1.0, status=QuotaStatus.UNKNOWN),
            IN_PLAY_EARLIER,
            id="status-unknown-with-percent",
        ),
    ],
)
def test_hysteresis_after_a_reading(
    previous: Hysteresis, new_reading: Reading, expected: Hysteresis
) -> None:
    assert hysteresis_after(previous, new_reading, CONFIG) == expected


def test_hysteresis_uses_the_raised_reentry_floor() -> None:
    config = LadderConfig(exit_cutoff_percent=10.0, reentry_min_remaining_percent=5.0)

    assert hysteresis_after(DROPPED, reading(8.0), config) == DROPPED
    assert hysteresis_after(DROPPED, reading(10.5), config).state is HysteresisState.IN_PLAY


def test_unchanged_hysteresis_is_the_previous_object() -> None:
    assert hysteresis_after(IN_PLAY_EARLIER, reading(80.0), CONFIG) is IN_PLAY_EARLIER
