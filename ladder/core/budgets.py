"""Budgets: the calendar window of a paid rung's budget, when the budget gates it, and
when one more entry of spend makes it cross its budget."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from ladder.core.prose import money_text, window_text
from ladder.core.types import BudgetWindow, Cause, LadderConfig, Reason, Rung, RungSpend


def budget_window_bounds(window: BudgetWindow, now: datetime) -> tuple[datetime, datetime]:
    """The calendar budget window (UTC) holding `now`: [start, end)."""
    midnight = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if window == BudgetWindow.DAY:
        return midnight, midnight + timedelta(days=1)
    if window == BudgetWindow.WEEK:
        monday = midnight - timedelta(days=midnight.weekday())
        return monday, monday + timedelta(days=7)
    if window == BudgetWindow.MONTH:
        first = midnight.replace(day=1)
        if first.month == 12:
            return first, first.replace(year=first.year + 1, month=1)
        return first, first.replace(month=first.month + 1)
    raise ValueError(f"unknown budget window {window!r}")


def budget_cause(
    rung: Rung, spend: RungSpend | None, config: LadderConfig, now: datetime
) -> Cause | None:
    """Why a paid rung is gated by its budget; None when it is not (or has no budget)."""
    budget = config.budget_for(rung)
    if budget is None:
        # A rung with no budget set is ordered but never gated.
        return None
    if budget == 0:
        return Cause(
            Reason.RUNG_DISABLED,
            f"The {rung.label} rung's budget is 0 USD: the rung is disabled",
            None,
        )
    spent = Decimal(0) if spend is None else spend.spent_usd
    if spent < budget:
        return None
    window_end = None if spend is None else spend.window_end
    if window_end is None:
        window = "an unknown window"
    else:
        # The window by its days, as the spend page writes it; the instant it ends is the
        # cause's `until` (the pool's next_change_at).
        window_start, _ = budget_window_bounds(
            config.budget_window, window_end - timedelta(microseconds=1)
        )
        window = window_text(window_start, window_end)
    return Cause(
        Reason.BUDGET_EXHAUSTED,
        f"The {rung.label} rung spent {money_text(spent)} USD of its {money_text(budget)} USD "
        f"{config.budget_window} budget of {window}",
        window_end if window_end is not None and window_end > now else None,
    )


def utc_day(instant: datetime) -> date:
    """The UTC calendar day of an instant: the key of the spend running totals."""
    return instant.astimezone(UTC).date()


def reaches_budget(budget: Decimal | None, spent: Decimal) -> bool:
    """Whether a rung's window total `spent` is at or past its budget: the moment spend
    changes what the budget gates (the change version must move once per window and
    budget: ladder.services.spend_totals.note_crossings). A rung without a budget
    (None) is never gated, and a budget of 0 disables the rung whatever it spends, so
    neither is ever reached."""
    if budget is None or budget <= 0:
        return False
    return spent >= budget
