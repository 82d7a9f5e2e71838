"""Polling rules: which connections are polled, when a reading is due, reset refreshes."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from ladder.core import should_schedule_reset_refresh
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
    ],
)
def test_a_reset_refresh_is_scheduled_once_per_near_instant(
    reset_in: int | None,
    previous_reset_in: int | None,
    previous_checked_ago: int | None,
    expected: bool,
) -> None:
    def at(seconds: int | None) -> datetime | None:
        return None if seconds is None else NOW + timedelta(seconds=seconds)

    decided = should_schedule_reset_refresh(
        at(reset_in),
        at(previous_reset_in),
        at(-previous_checked_ago) if previous_checked_ago is not None else None,
        NOW,
    )

    assert decided is expected
