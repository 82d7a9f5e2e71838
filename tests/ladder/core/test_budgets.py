"""Budgets: calendar windows, and the paid rungs they gate in a pool."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from ladder.core import (
    BudgetWindow,
    Exclusion,
    LadderConfig,
    Reason,
    Rung,
    RungSpend,
    budget_window_bounds,
    reaches_budget,
    utc_day,
)
from tests.ladder.core.factories import (
    LADDER_TIERS,
    LADDER_VIEWS,
    NOW,
    THRIFTY,
    pinned,
    pool,
    reasons,
    run,
)


@pytest.mark.parametrize(
    ("window", "now", "start", "end"),
    [
        pytest.param(
            BudgetWindow.DAY,
            NOW,
            datetime(2026, 11, 29, tzinfo=UTC),
            datetime(2026, 11, 30, tzinfo=UTC),
            id="day",
        ),
        pytest.param(
            BudgetWindow.WEEK,
            NOW,  # a Sunday
            datetime(2026, 11, 23, tzinfo=UTC),
            datetime(2026, 11, 30, tzinfo=UTC),
            id="week-from-sunday",
        ),
        pytest.param(
            BudgetWindow.WEEK,
            datetime(2026, 11, 30, 0, 0, tzinfo=UTC),  # a Monday, at midnight
            datetime(2026, 11, 30, tzinfo=UTC),
            datetime(2026, 12, 7, tzinfo=UTC),
            id="week-starts-monday",
        ),
        pytest.param(
            BudgetWindow.MONTH,
            NOW,
            datetime(2026, 11, 1, tzinfo=UTC),
            datetime(2026, 12, 1, tzinfo=UTC),
            id="month",
        ),
        pytest.param(
            BudgetWindow.MONTH,
            datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC),
            datetime(2026, 12, 1, tzinfo=UTC),
            datetime(2027, 1, 1, tzinfo=UTC),
            id="december-to-january",
        ),
        pytest.param(
            BudgetWindow.DAY,
            datetime(2026, 12, 31, 23, 30, tzinfo=UTC),
            datetime(2026, 12, 31, tzinfo=UTC),
            datetime(2027, 1, 1, tzinfo=UTC),
            id="day-across-new-year",
        ),
        pytest.param(
            BudgetWindow.DAY,
            datetime(2026, 11, 30, 0, 30, tzinfo=UTC),
            datetime(2026, 11, 30, tzinfo=UTC),
            datetime(2026, 12, 1, tzinfo=UTC),
            id="day-at-half-past-midnight",
        ),
    ],
)
def test_budget_window_bounds_are_calendar_utc(
    window: BudgetWindow, now: datetime, start: datetime, end: datetime
) -> None:
    assert budget_window_bounds(window, now) == (start, end)


def test_budget_window_bounds_use_utc_for_offset_clocks() -> None:
    tokyo_morning = datetime(2026, 12, 1, 8, 0, tzinfo=timezone(timedelta(hours=9)))  # Nov 30 UTC

    assert budget_window_bounds(BudgetWindow.MONTH, tokyo_morning) == (
        datetime(2026, 11, 1, tzinfo=UTC),
        datetime(2026, 12, 1, tzinfo=UTC),
    )


def test_a_rung_budgeted_at_zero_is_disabled() -> None:
    config = LadderConfig(cheap_budget_usd=Decimal("0"))
    candidates = [pinned("or", provider="openrouter", model="mini")]

    decision = run(THRIFTY, candidates, LADDER_VIEWS, tiers=LADDER_TIERS, config=config)

    assert decision.candidates == ()
    assert decision.excluded == (
        Exclusion(
            "openrouter",
            "mini",
            "or",
            Rung.CHEAP,
            Reason.RUNG_DISABLED,
            "The cheap rung's budget is 0 USD: the rung is disabled",
        ),
    )
    assert decision.next_change_at is None


def test_a_spent_budget_drops_its_rung_until_the_window_ends() -> None:
    config = LadderConfig(premium_budget_usd=Decimal("10.00"))
    window_end = datetime(2026, 12, 1, tzinfo=UTC)
    spend = {Rung.PREMIUM: RungSpend(Decimal("10.25"), window_end)}
    candidates = [
        pinned("or", id=1, provider="openrouter", model="opus"),
        pinned("or", id=2, provider="openrouter", model="mini"),
    ]

    decision = run(
        THRIFTY, candidates, LADDER_VIEWS, tiers=LADDER_TIERS, spend=spend, config=config
    )

    assert pool(decision) == [(2, "cheap", "or")]
    assert decision.excluded == (
        Exclusion(
            "openrouter",
            "opus",
            "or",
            Rung.PREMIUM,
            Reason.BUDGET_EXHAUSTED,
            "The premium rung spent 10.25 USD of its 10.00 USD month budget of "
            "2026-11-01 to 2026-11-30 UTC",
        ),
    )
    assert decision.next_change_at == window_end


def test_a_budget_is_exhausted_exactly_when_reached() -> None:
    config = LadderConfig(cheap_budget_usd=Decimal("5"))
    window_end = datetime(2026, 12, 1, tzinfo=UTC)
    candidates = [pinned("or", provider="openrouter", model="mini")]

    under = run(
        THRIFTY,
        candidates,
        LADDER_VIEWS,
        tiers=LADDER_TIERS,
        spend={Rung.CHEAP: RungSpend(Decimal("4.99"), window_end)},
        config=config,
    )
    reached = run(
        THRIFTY,
        candidates,
        LADDER_VIEWS,
        tiers=LADDER_TIERS,
        spend={Rung.CHEAP: RungSpend(Decimal("5"), window_end)},
        config=config,
    )

    assert pool(under) == [(1, "cheap", "or")]
    assert reasons(reached) == [("or", Reason.BUDGET_EXHAUSTED)]


def test_no_budget_means_never_gated() -> None:
    spend = {Rung.CHEAP: RungSpend(Decimal("1000000"), datetime(2026, 12, 1, tzinfo=UTC))}
    candidates = [pinned("or", provider="openrouter", model="mini")]

    decision = run(THRIFTY, candidates, LADDER_VIEWS, tiers=LADDER_TIERS, spend=spend)

    assert pool(decision) == [(1, "cheap", "or")]


# --- crossing a budget ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("budget", "spent", "reached"),
    [
        ("10", "10", True),  # reaches it exactly
        ("10", "25", True),  # past it
        ("10", "9.99999999", False),  # still under
        ("10", "0", False),
        ("0", "5", False),  # budget 0: the rung is disabled, nothing to reach
        (None, "1000", False),  # no budget: never gated
    ],
)
def test_a_budget_is_reached_at_or_past_it_and_never_without_one(
    budget: str | None, spent: str, reached: bool
) -> None:
    assert reaches_budget(None if budget is None else Decimal(budget), Decimal(spent)) is reached


def test_the_utc_day_of_an_instant_is_its_day_in_utc() -> None:
    plus_two = timezone(timedelta(hours=2))

    assert [
        utc_day(datetime(2026, 11, 30, 1, 30, tzinfo=plus_two)),
        utc_day(datetime(2026, 11, 29, 23, 59, 59, tzinfo=UTC)),
        utc_day(datetime(2026, 11, 30, 0, 0, tzinfo=UTC)),
    ] == [date(2026, 11, 29), date(2026, 11, 29), date(2026, 11, 30)]


def test_a_decision_carries_what_each_budget_still_allows() -> None:
    config = LadderConfig(cheap_budget_usd=Decimal("5"), premium_budget_usd=None)
    window_end = datetime(2026, 12, 1, tzinfo=UTC)
    candidates = [pinned("or", provider="openrouter", model="mini")]

    def left(spent: str) -> tuple[Decimal | None, Decimal | None]:
        spend = {Rung.CHEAP: RungSpend(Decimal(spent), window_end)}
        decided = run(
            THRIFTY, candidates, LADDER_VIEWS, tiers=LADDER_TIERS, spend=spend, config=config
        )
        return decided.budget_left_usd

    assert left("1.25") == (Decimal("3.75"), None)
    assert left("7") == (Decimal("0"), None)  # overspent: nothing left, never negative
    unbudgeted = run(THRIFTY, candidates, LADDER_VIEWS, tiers=LADDER_TIERS, config=LadderConfig())
    assert unbudgeted.budget_left_usd == (None, None)
