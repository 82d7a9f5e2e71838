"""Running totals of the spend ledger: rows per UTC day, rung and shard (SpendDayTotal),
moved in the transaction of the ledger rows they count (on PostgreSQL a single report is
one statement on its session's shard: ladder.services.spend_write; everything here
writes shard 0), so a budget window's spend is a sum of at most 31 days' rows per rung.

Whether spend crossed a budget is decided after the write has committed, never inside
it (`note_crossings`): the writer reads the window's sum, which then includes its own
spend and every write committed before it, and when that sum is at or past the budget it
inserts the window's BudgetCrossing row, once (a unique key: concurrent writers race on
it and exactly one wins), and the winner moves the change version. Whatever the order
of concurrent commits, the last writer to commit sees the whole window's spend, so a
crossing is never missed, and no writer holds a lock beyond its own statement. The
totals a write moves are locked in (day, rung) order, so writers never deadlock."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, date, datetime
from decimal import Decimal
from functools import reduce
from operator import or_

from django.db import connection, transaction
from django.db.models import Case, DecimalField, F, Q, Sum, Value, When
from django.db.models.functions import TruncDate

from billing.services import config_counter
from ladder import core
from ladder.core import LadderConfig, Rung
from ladder.models import BudgetCrossing, SpendDayTotal, SpendEntry
from ladder.services.common import PAID_RUNGS
from ladder.services.spend_write import window_sum

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
    """The shard-0 totals of `keys` (the shard this module writes)."""
    return reduce(or_, (Q(day=day, rung=rung) for day, rung in keys)) & Q(shard=0)


def _lock(keys: list[TotalKey]) -> set[TotalKey]:
    """Lock the shard-0 totals of `keys` in (day, rung) order; the keys that have one."""
    rows = (
        SpendDayTotal.objects.select_for_update()
        .filter(_matching(keys))
        .order_by("day", "rung")
        .values_list("day", "rung")
    )
    return set(rows)


def add_to_totals(entries: Iterable[SpendEntry]) -> None:
    """Add the entries (just inserted, in the caller's transaction) to the running
    totals: two queries in the steady state (lock, update), two more the first time a
    day's total is written. Whether they crossed a budget is `note_crossings`' to say,
    once the caller's transaction has committed."""
    entries = list(entries)
    increments = increments_of(entries)
    list_increments = list_increments_of(entries)
    if not increments:
        return
    keys = sorted(increments)
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


def budgeted_rungs_hit(
    entries: Iterable[SpendEntry], config: LadderConfig, now: datetime
) -> dict[str, Decimal]:
    """The budgeted paid rungs (budget above 0) that the entries add spend to in the
    current window, with their budgets: the rungs `note_crossings` must look at."""
    budgets = {
        paid.label: budget
        for paid in PAID_RUNGS
        if (budget := config.budget_for(paid)) is not None and budget > 0
    }
    if not budgets:
        return {}
    first, end = window_days(config, now)
    return {
        entry.rung: budgets[entry.rung]
        for entry in entries
        if entry.rung in budgets
        and entry.cost_usd
        and first <= core.utc_day(entry.occurred_at) < end
    }


def note_crossings(
    rungs: dict[str, Decimal],
    config: LadderConfig,
    now: datetime,
    *,
    judged_under: int | None = None,
) -> bool:
    """After spend on `rungs` (label: budget, from `budgeted_rungs_hit`) has committed:
    whether this call must move the change version: it is the one that records a rung's
    window reaching its budget, or (`judged_under`: the `config` counter the spend was
    judged under) the config moved since, so the budgets it was judged against may no
    longer be the ones decisions use (a budget lowered during a batch). One query (the
    window's sums, with the config counter) when no rung has reached its budget, one
    more per rung that has (and one for the counter when several rungs are summed);
    a crossing is True at most once per rung, window and budget, whichever of any number
    of concurrent writers gets there first."""
    if not rungs:
        return False
    first, end = window_days(config, now)
    window_start, _ = core.budget_window_bounds(config.budget_window, now)
    version: int | None
    if connection.vendor == "postgresql" and len(rungs) == 1:
        # A single report's case, on the request path: one prepared statement.
        ((label, _),) = rungs.items()
        total, version = window_sum(label, first, end)
        totals = {label: total}
    else:
        totals = window_totals(rungs, first, end)
        version = config_counter() if judged_under is not None else None
    if judged_under is not None and version != judged_under:
        return True
    crossed = False
    for label, budget in sorted(rungs.items()):
        if not core.reaches_budget(budget, totals.get(label, Decimal(0))):
            continue
        with transaction.atomic():
            _, created = BudgetCrossing.objects.get_or_create(
                rung=label,
                window_start=window_start,
                budget_usd=budget,
                defaults={"crossed_at": now},
            )
        crossed = crossed or created
    return crossed


PAID_LABELS = frozenset(rung.label for rung in PAID_RUNGS)


def must_move_after_spend(
    entries: Iterable[SpendEntry], config: LadderConfig, judged_under: int, now: datetime
) -> bool:
    """Once `entries` (judged under `config`, the snapshot of the `config` counter value
    `judged_under`) have committed: whether the writer must move the change version.
    They crossed a budget (`note_crossings`), or they are paid spend and the config
    moved since they were judged: a budget lowered or set meanwhile was never checked
    against them, and a decision computed under it before they committed would stay
    cached. The counter is read after the commit, so a config write committing later
    sees them. Spend on the plan-included rungs, or of no cost, never moves it (no
    query)."""
    entries = list(entries)
    rungs = budgeted_rungs_hit(entries, config, now)
    if rungs:
        return note_crossings(rungs, config, now, judged_under=judged_under)
    if not any(entry.rung in PAID_LABELS and entry.cost_usd for entry in entries):
        return False
    return config_counter() != judged_under


def prune_budget_crossings(*, older_than: datetime) -> int:
    """Delete the crossing records of windows that started before `older_than`."""
    deleted, _ = BudgetCrossing.objects.filter(window_start__lt=older_than).delete()
    return deleted


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
