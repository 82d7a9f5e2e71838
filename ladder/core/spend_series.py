"""The spend page's numbers, pure: the current and the previous budget windows as UTC
days, each day's paid spend per rung and what the plans saved, and each window's totals,
from the running day totals the shell loads (no ORM, no clock: `now` is an argument)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

from ladder.core.budgets import budget_window_bounds, utc_day
from ladder.core.types import BudgetWindow, Rung

# The rungs that spend against a budget, and those whose list price is "saved".
PAID = (Rung.CHEAP, Rung.PREMIUM)
PLAN_INCLUDED = (Rung.SUBSCRIPTION, Rung.KEYLESS)
ONE_DAY = timedelta(days=1)
ZERO = Decimal(0)


@dataclass(frozen=True, slots=True)
class DayTotal:
    """One running total as stored: a UTC day and a rung label, what its entries cost
    and their list price."""

    day: date
    rung: str
    spent_usd: Decimal
    list_price_usd: Decimal


@dataclass(frozen=True, slots=True)
class SpendDay:
    """One UTC day: the paid rungs' spend and the list price the plans served."""

    day: date
    cheap_usd: Decimal = ZERO
    premium_usd: Decimal = ZERO
    saved_usd: Decimal = ZERO

    @property
    def paid_usd(self) -> Decimal:
        """What the paid rungs cost that day."""
        return self.cheap_usd + self.premium_usd

    def spent_on(self, rung: Rung) -> Decimal:
        """The day's spend on one paid rung."""
        return self.cheap_usd if rung is Rung.CHEAP else self.premium_usd


@dataclass(frozen=True, slots=True)
class WindowSeries:
    """One budget window, day by day: [start, end) in UTC days; `days` runs from the
    start to the window's last day, or to today in the current window (no future day)."""

    start: date
    end: date
    is_current: bool
    days: tuple[SpendDay, ...]

    @property
    def last_day(self) -> date:
        """The window's last day (inclusive)."""
        return self.end - ONE_DAY

    @property
    def starts_at(self) -> datetime:
        """The window's first instant (UTC midnight)."""
        return datetime.combine(self.start, time(), tzinfo=UTC)

    @property
    def ends_at(self) -> datetime:
        """The instant the window ends (exclusive)."""
        return datetime.combine(self.end, time(), tzinfo=UTC)

    @property
    def length(self) -> int:
        """The window's length in days, future days included."""
        return (self.end - self.start).days

    @property
    def cheap_usd(self) -> Decimal:
        return sum((d.cheap_usd for d in self.days), ZERO)

    @property
    def premium_usd(self) -> Decimal:
        return sum((d.premium_usd for d in self.days), ZERO)

    @property
    def paid_usd(self) -> Decimal:
        return self.cheap_usd + self.premium_usd

    @property
    def saved_usd(self) -> Decimal:
        return sum((d.saved_usd for d in self.days), ZERO)

    def spent_on(self, rung: Rung) -> Decimal:
        """The window's spend on one paid rung."""
        return self.cheap_usd if rung is Rung.CHEAP else self.premium_usd


def budget_windows(
    window: BudgetWindow, now: datetime
) -> tuple[tuple[datetime, datetime], tuple[datetime, datetime]]:
    """The previous and the current calendar budget windows (UTC), each [start, end):
    the previous one ends where the current one starts."""
    start, end = budget_window_bounds(window, now)
    previous_start, previous_end = budget_window_bounds(window, start - timedelta(microseconds=1))
    assert previous_end == start
    return (previous_start, previous_end), (start, end)


def window_series(
    totals: Iterable[DayTotal], first: date, end: date, today: date, *, is_current: bool
) -> WindowSeries:
    """The days [first, end) of one window, through `today` at the latest, each with the
    paid rungs' spend and the plans' list price from `totals` (other days and other
    rungs, such as free, are left out; a day without a total is zeros)."""
    cheap: dict[date, Decimal] = {}
    premium: dict[date, Decimal] = {}
    saved: dict[date, Decimal] = {}
    plan_labels = {rung.label for rung in PLAN_INCLUDED}
    for total in totals:
        if not first <= total.day < end:
            continue
        if total.rung == Rung.CHEAP.label:
            cheap[total.day] = cheap.get(total.day, ZERO) + total.spent_usd
        elif total.rung == Rung.PREMIUM.label:
            premium[total.day] = premium.get(total.day, ZERO) + total.spent_usd
        elif total.rung in plan_labels:
            saved[total.day] = saved.get(total.day, ZERO) + total.list_price_usd
    last = min(end, today + ONE_DAY)
    days = []
    day = first
    while day < last:
        days.append(
            SpendDay(day, cheap.get(day, ZERO), premium.get(day, ZERO), saved.get(day, ZERO))
        )
        day += ONE_DAY
    return WindowSeries(first, end, is_current, tuple(days))


def spend_series(
    totals: Iterable[DayTotal], window: BudgetWindow, now: datetime
) -> tuple[WindowSeries, WindowSeries]:
    """The previous and the current window's series of the day totals, at `now`."""
    (previous_start, previous_end), (start, end) = budget_windows(window, now)
    rows = list(totals)
    today = utc_day(now)
    return (
        window_series(rows, previous_start.date(), previous_end.date(), today, is_current=False),
        window_series(rows, start.date(), end.date(), today, is_current=True),
    )
