"""Plan utilisation read back (ladder/services/plan_use.py): each plan connection's
windows that reset in a period, the lowest remaining percent read before each reset, in
one query whatever the readings hold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ladder import services
from ladder.services.plan_use import plan_use
from tests.ladder.factories import make_connection, make_reading

pytestmark = pytest.mark.django_db

DAY = datetime(2026, 11, 29, tzinfo=UTC)
NOW = DAY + timedelta(hours=12)


def _read(connection_id: str, at: datetime, remaining: float, reset_at: datetime) -> None:
    make_reading(
        connection_id, now=at, checked_at=at, remaining_percent=remaining, reset_at=reset_at
    )


@pytest.fixture
def readings() -> None:
    make_connection("max-1")
    make_connection("max-2")
    five, ten = DAY + timedelta(hours=5), DAY + timedelta(hours=10)
    # max-1: the 05:00 window read at 80 % then 30 % left; the 10:00 window read down to 0.
    _read("max-1", DAY + timedelta(hours=1), 80.0, five)
    _read("max-1", DAY + timedelta(hours=4), 30.0, five)
    _read("max-1", DAY + timedelta(hours=6), 20.0, ten)
    _read("max-1", DAY + timedelta(hours=9), 0.0, ten)
    # max-2: the 10:00 window left at 90 %; its 15:00 window has not reset at NOW.
    _read("max-2", DAY + timedelta(hours=7), 90.0, ten)
    _read("max-2", DAY + timedelta(hours=11), 60.0, DAY + timedelta(hours=15))
    # A window that reset the day before the period.
    _read("max-2", DAY - timedelta(hours=3), 10.0, DAY - timedelta(hours=1))


def test_each_window_that_reset_in_the_period_from_its_lowest_reading(readings: None) -> None:
    uses = plan_use(DAY, DAY + timedelta(days=1), now=NOW)

    assert [
        (
            u.connection_id,
            [(w.reset_at.hour, w.lowest_remaining_percent, w.readings) for w in u.windows],
        )
        for u in uses
    ] == [
        ("max-1", [(5, 30.0, 2), (10, 0.0, 2)]),
        ("max-2", [(10, 90.0, 1)]),
    ]
    assert [(u.mean_used_percent, u.mean_left_percent, u.unused_windows) for u in uses] == [
        (85.0, 15.0, 0.3),
        (10.0, 90.0, 0.9),
    ]


def test_the_spend_report_carries_the_periods_plan_use(readings: None) -> None:
    report = services.spend_report(now=NOW, period=(DAY, DAY + timedelta(days=1)))

    assert [(u.connection_id, u.resets) for u in report.plan_use] == [("max-1", 2), ("max-2", 1)]


@pytest.mark.parametrize("more", [0, 200])
def test_one_query_whatever_the_readings_hold(
    readings: None, more: int, django_assert_num_queries: Any
) -> None:
    for index in range(more):
        at = DAY + timedelta(minutes=3 * index)
        _read("max-1" if index % 2 else "max-2", at, 50.0, at + timedelta(minutes=1))

    with django_assert_num_queries(1):
        uses = plan_use(DAY, DAY + timedelta(days=1), now=NOW)

    assert sum(u.resets for u in uses) == 3 + more
