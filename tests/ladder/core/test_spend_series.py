"""The spend page's pure numbers: the previous and current budget windows, and a window's
days (through today) with the paid rungs' spend and the plans' savings from day totals."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from ladder.core import BudgetWindow
from ladder.core.spend_series import (
    DayTotal,
    SpendDay,
    budget_windows,
    spend_series,
    window_series,
)

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _utc(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, tzinfo=UTC)


@pytest.mark.parametrize(
    ("window", "now", "previous", "current"),
    [
        pytest.param(
            BudgetWindow.DAY,
            NOW,
            (_utc(2026, 11, 28), _utc(2026, 11, 29)),
            (_utc(2026, 11, 29), _utc(2026, 11, 30)),
            id="day",
        ),
        pytest.param(
            BudgetWindow.WEEK,
            NOW,  # a Sunday: the week started on Monday the 23rd
            (_utc(2026, 11, 16), _utc(2026, 11, 23)),
            (_utc(2026, 11, 23), _utc(2026, 11, 30)),
            id="week",
        ),
        pytest.param(
            BudgetWindow.MONTH,
            NOW,
            (_utc(2026, 10, 1), _utc(2026, 11, 1)),
            (_utc(2026, 11, 1), _utc(2026, 12, 1)),
            id="month",
        ),
        pytest.param(
            BudgetWindow.MONTH,
            datetime(2027, 1, 1, 0, 0, tzinfo=UTC),
            (_utc(2026, 12, 1), _utc(2027, 1, 1)),
            (_utc(2027, 1, 1), _utc(2027, 2, 1)),
            id="month-across-a-year",
        ),
    ],
)
def test_the_previous_window_ends_where_the_current_one_starts(
    window: BudgetWindow,
    now: datetime,
    previous: tuple[datetime, datetime],
    current: tuple[datetime, datetime],
) -> None:
    assert budget_windows(window, now) == (previous, current)


def _total(day: date, rung: str, spent: str, listed: str) -> DayTotal:
    return DayTotal(day, rung, Decimal(spent), Decimal(listed))


def test_a_window_runs_to_today_with_zeros_on_days_without_spend() -> None:
    totals = [
        _total(date(2026, 11, 2), "cheap", "1.5", "1.5"),
        _total(date(2026, 11, 2), "premium", "3", "3"),
        _total(date(2026, 11, 3), "subscription", "9", "4"),  # saved: its list price
        _total(date(2026, 11, 3), "keyless", "0", "0.5"),
        _total(date(2026, 11, 3), "free", "7", "7"),  # neither paid nor plan-included
        _total(date(2026, 10, 31), "cheap", "8", "8"),  # before the window
        _total(date(2026, 11, 5), "cheap", "8", "8"),  # after today
    ]

    series = window_series(
        totals, date(2026, 11, 1), date(2026, 12, 1), date(2026, 11, 4), is_current=True
    )

    assert series.days == (
        SpendDay(date(2026, 11, 1)),
        SpendDay(date(2026, 11, 2), Decimal("1.5"), Decimal("3"), Decimal(0)),
        SpendDay(date(2026, 11, 3), Decimal(0), Decimal(0), Decimal("4.5")),
        SpendDay(date(2026, 11, 4)),
    )
    assert (series.cheap_usd, series.premium_usd, series.paid_usd, series.saved_usd) == (
        Decimal("1.5"),
        Decimal("3"),
        Decimal("4.5"),
        Decimal("4.5"),
    )
    assert (series.last_day, series.length) == (date(2026, 11, 30), 30)
    assert (series.starts_at, series.ends_at) == (_utc(2026, 11, 1), _utc(2026, 12, 1))


def test_the_previous_window_has_all_its_days_and_the_current_one_stops_today() -> None:
    previous, current = spend_series([], BudgetWindow.MONTH, NOW)

    assert (previous.is_current, len(previous.days), previous.days[-1].day) == (
        False,
        31,
        date(2026, 10, 31),
    )
    assert (current.is_current, len(current.days), current.days[-1].day) == (
        True,
        29,
        date(2026, 11, 29),
    )
    assert (previous.paid_usd, current.saved_usd) == (Decimal(0), Decimal(0))
