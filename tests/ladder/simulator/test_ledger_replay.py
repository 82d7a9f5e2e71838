"""'What would have happened': a hand-written ledger replayed as bought, with one more
seat, with one seat fewer and with a lower budget, with the exact figures of each run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from ladder.core import Rung
from ladder.core.forecast import ForecastReading
from ladder.simulator.ledger_replay import (
    Change,
    LedgerRequest,
    ReplayResult,
    Seat,
    measure_seat,
    replay,
)

ANCHOR = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
FIVE_HOURS = timedelta(hours=5)
SEAT = Seat("claude-max-1", "claude", Decimal("3.00"), FIVE_HOURS, ANCHOR)
SECOND_SEAT = Seat("claude-max-2", "claude", Decimal("3.00"), FIVE_HOURS, ANCHOR)


def at(hour: int, minute: int) -> datetime:
    return datetime(2026, 11, 29, hour, minute, tzinfo=UTC)


def claude(when: datetime, usd: str) -> LedgerRequest:
    """A Claude request listed at `usd`; without a plan it bills the same on premium."""
    return LedgerRequest(when, "claude", Decimal(usd), Rung.PREMIUM, Decimal(usd))


# The recorded period: the seat's first window holds 3.00 of list price, so the 10:40 and
# 10:50 requests went to premium; an OpenAI request no Claude seat serves (cheap, 0.40);
# 15:10 falls in the seat's next window.
LEDGER = (
    claude(at(10, 10), "1.00"),
    claude(at(10, 20), "1.00"),
    claude(at(10, 30), "1.00"),
    claude(at(10, 40), "1.00"),
    claude(at(10, 50), "1.50"),
    LedgerRequest(at(11, 0), "openai", Decimal("2.00"), Rung.CHEAP, Decimal("0.40")),
    claude(at(15, 10), "1.00"),
)


def test_the_ledger_as_bought_pays_what_was_recorded() -> None:
    assert replay(LEDGER, [SEAT]) == ReplayResult(
        paid_usd=Decimal("2.90"),
        saved_usd=Decimal("4.00"),
        paid_by_rung={Rung.CHEAP: Decimal("0.40"), Rung.PREMIUM: Decimal("2.50")},
        plan_requests=4,
        paid_requests=3,
        empty_subscription_requests=2,
        unserved_requests=0,
    )


def test_one_more_seat_would_have_saved_what_premium_paid() -> None:
    assert replay(LEDGER, [SEAT], Change(add_seats=(SECOND_SEAT,))) == ReplayResult(
        paid_usd=Decimal("0.40"),
        saved_usd=Decimal("6.50"),
        paid_by_rung={Rung.CHEAP: Decimal("0.40"), Rung.PREMIUM: Decimal("0")},
        plan_requests=6,
        paid_requests=1,
        empty_subscription_requests=0,
        unserved_requests=0,
    )


def test_one_seat_fewer_would_have_paid_every_claude_request() -> None:
    assert replay(LEDGER, [SEAT], Change(remove_seat_ids=("claude-max-1",))) == ReplayResult(
        paid_usd=Decimal("6.90"),
        saved_usd=Decimal("0"),
        paid_by_rung={Rung.CHEAP: Decimal("0.40"), Rung.PREMIUM: Decimal("6.50")},
        plan_requests=0,
        paid_requests=7,
        empty_subscription_requests=6,
        unserved_requests=0,
    )


def test_a_lower_budget_leaves_what_it_cannot_pay_unserved() -> None:
    change = Change(budgets={Rung.PREMIUM: Decimal("2.00")})

    result = replay(LEDGER, [SEAT], change, budgets={Rung.PREMIUM: None})

    assert (result.paid_usd, result.paid_by_rung[Rung.PREMIUM], result.unserved_requests) == (
        Decimal("1.40"),
        Decimal("1.00"),
        1,
    )


def test_a_seat_too_little_used_to_measure_holds_what_it_served_in_its_busiest_window() -> None:
    resets = (ANCHOR, ANCHOR + FIVE_HOURS)
    readings = [
        ForecastReading(at(9, 0), 100.0, resets[0]),
        ForecastReading(at(9, 30), 99.5, resets[0]),  # 0.5 %: under the 1 % to measure
        ForecastReading(at(11, 0), 100.0, resets[1]),  # the refill is not a use
    ]
    served = [
        (at(10, 10), Decimal("1.00")),
        (at(10, 20), Decimal("2.00")),
        (at(9, 10), Decimal("0.50")),
    ]

    measured = measure_seat("claude-max-1", "claude", readings, served, start=at(0, 0))

    # Resets five hours apart: a 5-hour window anchored on the latest; 10:10 and 10:20 share
    # the window from 10:00 (3.00), 09:10 falls in the one before (0.50).
    assert measured.seat == Seat("claude-max-1", "claude", Decimal("3.00"), FIVE_HOURS, resets[1])
    assert (measured.used_percent, measured.basis) == (
        0.5,
        "too little use to measure: what it served in its busiest window",
    )
