"""Polling rules: which connections are polled, when a reading is due, reset refreshes."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from ladder.core import answers_refresh, is_reading_due, should_schedule_reset_refresh
from ladder.core.polling import has_rolled_over
from tests.ladder.core.factories import NOW


@pytest.mark.parametrize(
    ("reset_in", "previous_reset_in", "previous_checked_ago", "expected"),
    [
        pytest.param(60, None, None, True, id="first-reading-with-a-near-reset"),
        pytest.param(None, None, None, False, id="no-reset"),
        pytest.param(-1, None, None, False, id="reset-already-passed"),
        pytest.param(3 * 3600, None, None, False, id="beyond-the-horizon-the-beat-handles-it"),
        pytest.param(60, 60, 150, False, id="same-instant-already-scheduled"),
        pytest.param(60, 120, 150, True, id="a-new-instant"),
        pytest.param(600, 600, 3600, True, id="same-instant-was-beyond-the-horizon-then"),
        # A reset jitters by up to about 2 s on every response: the same instant.
        pytest.param(61.879, 60, 150, False, id="jitter-later-is-the-same-instant"),
        pytest.param(60, 61.879, 150, False, id="jitter-earlier-is-the-same-instant"),
        pytest.param(119.999, 60, 150, False, id="just-under-a-minute-is-still-jitter"),
    ],
)
def test_a_reset_refresh_is_scheduled_once_per_near_instant(
    reset_in: float | None,
    previous_reset_in: float | None,
    previous_checked_ago: int | None,
    expected: bool,
) -> None:
    def at(seconds: float | None) -> datetime | None:
        return None if seconds is None else NOW + timedelta(seconds=seconds)

    decided = should_schedule_reset_refresh(
        at(reset_in),
        at(previous_reset_in),
        at(-previous_checked_ago) if previous_checked_ago is not None else None,
        NOW,
    )

    assert decided is expected


DUE_AGE = timedelta(seconds=180)
S = timedelta(seconds=1)


@pytest.mark.parametrize(
    ("checked_at", "reset_at", "due"),
    [
        (None, None, True),  # never read
        (NOW - 179 * S, None, False),
        (NOW - 180 * S, None, True),  # exactly due_age old
        (NOW - 10 * S, NOW + S, False),
        (NOW - 10 * S, NOW, True),  # its reset has just passed
        (NOW + S, None, True),  # dated ahead of the clock: its age is unknown
    ],
)
def test_a_reading_is_due_by_age_by_a_passed_reset_or_when_dated_ahead(
    checked_at: datetime | None, reset_at: datetime | None, due: bool
) -> None:
    assert is_reading_due(checked_at, reset_at, NOW, DUE_AGE) is due


@pytest.mark.parametrize(
    ("checked_at", "answers"),
    [
        (None, False),
        (NOW - 11 * S, False),  # checked before the refresh was requested
        (NOW - 10 * S, True),  # checked at the request
        (NOW, True),
        (NOW + S, False),  # dated ahead of the receive time proves nothing about now
    ],
)
def test_only_a_reading_checked_since_the_request_and_not_ahead_answers_a_refresh(
    checked_at: datetime | None, answers: bool
) -> None:
    assert answers_refresh(checked_at, NOW - 10 * S, NOW) is answers


@pytest.mark.parametrize(
    ("moved_seconds", "rolled"),
    [
        pytest.param(1.879, False, id="the-largest-jitter-measured"),
        pytest.param(-1.879, False, id="jitter-backwards"),
        pytest.param(59.999, False, id="under-a-minute"),
        pytest.param(60, True, id="a-minute-forward"),
        pytest.param(5 * 3600, True, id="a-five-hour-window-rolled-over"),
        pytest.param(-3600, False, id="backwards-is-never-a-rollover"),
    ],
)
def test_a_window_rolled_over_only_when_its_reset_moved_a_minute_forward(
    moved_seconds: float, rolled: bool
) -> None:
    assert has_rolled_over(NOW, NOW + timedelta(seconds=moved_seconds)) is rolled
    assert has_rolled_over(None, NOW) is False
