"""Running totals of the spend ledger: one row per UTC day and rung (SpendDayTotal),
moved in the transaction of the ledger rows they count, so a budget window's spend is a
sum of at most 31 rows per rung, and a write knows at once whether it crossed a budget.

Race safety on PostgreSQL (READ COMMITTED): a write that lands in the current budget
window of a budgeted rung first locks the total of that rung's window start day (rows
are always locked in (day, rung) order, so writers never deadlock), then adds its costs
with `spent_usd = spent_usd + x`, then reads the window's sum in a new statement: every
writer to that window holds the same lock until it commits, so each one sees exactly the
spend before it and after it, and exactly one of them sees the budget crossed. SQLite
serialises writers itself (the ledger insert comes first in the transaction)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, date, datetime
from decimal import Decimal
from functools import reduce
from operator import or_

from django.db import transaction
from django.db.models import Case, DecimalField, F, Q, Sum, Value, When
from django.db.models.functions import TruncDate

from ladder import core
from ladder.core import LadderConfig, Rung
from ladder.models import SpendDayTotal, SpendEntry
from ladder.services.common import PAID_RUNGS

TOTAL_FIELD: DecimalField[Decimal, Decimal] = DecimalField(max_digits=24, decimal_places=8)

# A (day, rung) key of the totals.
TotalKey = tuple[date, str]


def window_days(config: LadderConfig, now: datetime) -> tuple[date, date]:
    """The current budget window as UTC days: [first, end)."""
    start, end = core.budget_window_bounds(config.budget_window, now)
    return start.date(), end.date()


def window_totals(rungs: Iterable[str], first: date, end: date) -> dict[str, Decimal]:
    """Spend of each of `rungs` over the days [first, end), from the totals (one query)."""
    rows = (
        SpendDayTotal.objects.filter(rung__in=list(rungs), day__gte=first, day__lt=end)
        .order_by()
        .values("rung")
        .annotate(total=Sum("spent_usd"))
        .values_list("rung", "total")
    )
    return {rung: total or Decimal(0) for rung, total in rows}


def increments_of(entries: Iterable[SpendEntry]) -> dict[TotalKey, Decimal]:
    """What the entries add to each (UTC day, rung) total."""
    increments: dict[TotalKey, Decimal] = defaultdict(Decimal)
    for entry in entries:
        increments[(core.utc_day(entry.occurred_at), entry.rung)] += entry.cost_usd
    return dict(increments)


def list_increments_of(entries: Iterable[SpendEntry]) -> dict[TotalKey, Decimal]:
    """What the entries add to each (UTC day, rung) total's list price."""
    increments: dict[TotalKey, Decimal] = defaultdict(Decimal)
    for entry in entries:
        increments[(core.utc_day(entry.occurred_at), entry.rung)] += entry.list_price_usd
    return dict(increments)


def _change(amounts: dict[TotalKey, Decimal]) -> Case | Value:
    """The amount each total of `amounts` moves by, as one expression."""
    if len(amounts) == 1:
        (amount,) = amounts.values()
        return Value(amount, output_field=TOTAL_FIELD)
    return Case(
        *(When(day=d, rung=r, then=Value(a)) for (d, r), a in amounts.items()),
        default=Value(Decimal(0), output_field=TOTAL_FIELD),
        output_field=TOTAL_FIELD,
    )


def _matching(keys: Iterable[TotalKey]) -> Q:
    return reduce(or_, (Q(day=day, rung=rung) for day, rung in keys))


def _lock(keys: list[TotalKey]) -> set[TotalKey]:
    """Lock the totals of `keys` in (day, rung) order; the keys that have a row."""
    rows = (
        SpendDayTotal.objects.select_for_update()
        .filter(_matching(keys))
        .order_by("day", "rung")
        .values_list("day", "rung")
    )
    return set(rows)


def add_to_totals(entries: Iterable[SpendEntry], config: LadderConfig, now: datetime) -> bool:
    """Add the entries (just inserted, in the caller's transaction) to the running
    totals; whether they made a budgeted rung cross its budget in the current window.
    Three queries in the steady state (lock, update, window sum), two more the first
    time a day's total is written; the window sum only when a budgeted rung is hit."""
    entries = list(entries)
    increments = increments_of(entries)
    list_increments = list_increments_of(entries)
    if not increments:
        return False
    first, end = window_days(config, now)
    budgets: dict[str, Decimal] = {}
    for paid in PAID_RUNGS:
        budget = config.budget_for(paid)
        if budget is not None and budget > 0:
            budgets[paid.label] = budget
    # What the entries add to the current window of each budgeted rung.
    added: dict[str, Decimal] = defaultdict(Decimal)
    for (day, label), amount in increments.items():
        if label in budgets and first <= day < end:
            added[label] += amount
    keys = sorted(set(increments) | {(first, label) for label in added})
    if len(_lock(keys)) < len(keys):
        # First spend of a day on a rung: create its total (a concurrent writer may
        # create it too: the conflict is ignored), then lock again.
        SpendDayTotal.objects.bulk_create(
            [SpendDayTotal(day=day, rung=label) for day, label in keys], ignore_conflicts=True
        )
        _lock(keys)
    moving = {key for key in increments if increments[key] or list_increments[key]}
    if moving:
        # One UPDATE moves both sums of every total it touches.
        SpendDayTotal.objects.filter(_matching(moving)).update(
            spent_usd=F("spent_usd") + _change({k: increments[k] for k in moving}),
            list_price_usd=F("list_price_usd") + _change({k: list_increments[k] for k in moving}),
        )
    if not added:
        return False
    after = window_totals(added, first, end)
    return any(
        core.crosses_budget(
            budgets[label], after.get(label, Decimal(0)) - amount, after.get(label, Decimal(0))
        )
        for label, amount in added.items()
    )


def rebuild_spend_totals() -> int:
    """Recompute every total from the ledger (a restored database, or rows written with
    bulk_create, as test worlds do); the number of totals written."""
    rows = (
        SpendEntry.objects.annotate(day=TruncDate("occurred_at", tzinfo=UTC))
        .order_by()
        .values("day", "rung")
        .annotate(total=Sum("cost_usd"), list_total=Sum("list_price_usd"))
    )
    totals = [
        SpendDayTotal(
            day=r["day"], rung=r["rung"], spent_usd=r["total"], list_price_usd=r["list_total"]
        )
        for r in rows
    ]
    with transaction.atomic():
        SpendDayTotal.objects.all().delete()
        SpendDayTotal.objects.bulk_create(totals, batch_size=1000)
    return len(totals)


PLAN_LABELS = (Rung.SUBSCRIPTION.label, Rung.KEYLESS.label)


def window_spend_and_saved(first: date, end: date) -> tuple[dict[str, Decimal], Decimal]:
    """Over the days [first, end), from the totals in one query: the spend of each paid
    rung, and the list price of the traffic the plan-included rungs (subscription,
    keyless) served (what the plans saved)."""
    labels = [rung.label for rung in PAID_RUNGS]
    rows = (
        SpendDayTotal.objects.filter(rung__in=[*labels, *PLAN_LABELS], day__gte=first, day__lt=end)
        .order_by()
        .values("rung")
        .annotate(total=Sum("spent_usd"), listed=Sum("list_price_usd"))
        .values_list("rung", "total", "listed")
    )
    spent: dict[str, Decimal] = {}
    saved = Decimal(0)
    for rung, total, listed in rows:
        if rung in PLAN_LABELS:
            saved += listed or Decimal(0)
        else:
            spent[rung] = total or Decimal(0)
    return spent, saved


def spend_by_rung(spend: dict[str, Decimal], window_end: datetime) -> dict[Rung, core.RungSpend]:
    """The core's view of each paid rung's window spend."""
    return {
        rung: core.RungSpend(spent_usd=spend.get(rung.label, Decimal(0)), window_end=window_end)
        for rung in PAID_RUNGS
    }
