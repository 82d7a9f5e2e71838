"""The spend page's reads: the paid rungs' spend and the plans' savings per UTC day over
the current and the previous budget window (from the running day totals), and a window's
breakdown by connection, by model and by the gateway token that reported it (grouped in
SQL), and the plans' utilisation over the period. Seven queries whatever the ledger or
the readings hold: the settings, the day totals, the breakdown's totals, connections,
models and tokens (each list capped at BREAKDOWN_ROWS groups), and the plans' windows."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from django.db.models import Count, Q, QuerySet, Sum

from ladder.core import LadderConfig
from ladder.core.budgets import utc_day
from ladder.core.plan_use import PlanUse
from ladder.core.spend_series import (
    PAID,
    PLAN_INCLUDED,
    DayTotal,
    WindowSeries,
    budget_windows,
    spend_series,
    window_series,
)
from ladder.models import SpendDayTotal, SpendEntry
from ladder.services.config import load_config
from ladder.services.plan_use import plan_use
from ladder.services.spend import SpendSummary, summarise_spend
from ladder.services.spend_ledger import SpendFilters
from ladder.services.spend_totals import spend_by_rung

# Groups listed per breakdown, largest list price first; the CSV export has every entry.
BREAKDOWN_ROWS = 100

WindowName = Literal["current", "previous"]
_PLAN_LABELS = [rung.label for rung in PLAN_INCLUDED]
_SERIES_LABELS = [rung.label for rung in (*PAID, *PLAN_INCLUDED)]


@dataclass(frozen=True, slots=True)
class BreakdownRow:
    """One connection's or model's traffic in a window (`key`: the connection id, or
    provider/model)."""

    key: str
    requests: int
    billed_usd: Decimal
    list_price_usd: Decimal
    saved_usd: Decimal


@dataclass(frozen=True, slots=True)
class Breakdown:
    """A window's traffic by connection and by model, and its totals."""

    window: WindowName
    start: datetime
    end: datetime
    total: BreakdownRow
    by_connection: list[BreakdownRow]
    by_model: list[BreakdownRow]
    # More groups than BREAKDOWN_ROWS: the lists show the largest ones.
    are_connections_cut: bool
    are_models_cut: bool
    # By the API token that reported each entry (entries from before tokens were
    # recorded, migration 0017, are one row: "no token recorded").
    by_token: list[BreakdownRow] = dataclasses.field(default_factory=list)
    are_tokens_cut: bool = False


@dataclass(frozen=True, slots=True)
class SpendReport:
    """Everything the spend page shows, read at `now`."""

    config: LadderConfig
    previous: WindowSeries
    current: WindowSeries
    # The current window against each paid rung's budget (the overview's numbers).
    summary: SpendSummary
    breakdown: Breakdown
    # The chosen period day by day (through today at the latest).
    period: WindowSeries
    # Each plan connection's windows that reset in the period.
    plan_use: list[PlanUse] = dataclasses.field(default_factory=list)

    @property
    def budgets(self) -> dict[str, Decimal | None]:
        """Each paid rung's budget per window (None: none set)."""
        return {rung.label: self.config.budget_for(rung) for rung in PAID}

    @property
    def has_history(self) -> bool:
        """Whether either window has any paid spend or savings to draw."""
        return any(w.paid_usd or w.saved_usd for w in (self.previous, self.current))


def day_totals(first: datetime, end: datetime) -> list[DayTotal]:
    """The running totals of the paid and plan-included rungs over the UTC days
    [first, end), their shards summed (one query, at most four rows a day)."""
    rows = (
        SpendDayTotal.objects.filter(
            rung__in=_SERIES_LABELS, day__gte=first.date(), day__lt=end.date()
        )
        .values("day", "rung")
        .annotate(spent=Sum("spent_usd"), listed=Sum("list_price_usd"))
        .order_by("day", "rung")
        .values_list("day", "rung", "spent", "listed")
    )
    return [DayTotal(day, rung, spent, listed) for day, rung, spent, listed in rows]


_SUMS: dict[str, Any] = {
    "requests": Count("id"),
    "billed": Sum("billed_usd"),
    "listed": Sum("list_price_usd"),
    "saved": Sum("list_price_usd", filter=Q(rung__in=_PLAN_LABELS)),
}


def _row(key: str, values: dict[str, Any]) -> BreakdownRow:
    return BreakdownRow(
        key=key,
        requests=values["requests"] or 0,
        billed_usd=values["billed"] or Decimal(0),
        list_price_usd=values["listed"] or Decimal(0),
        saved_usd=values["saved"] or Decimal(0),
    )


def _grouped(entries: QuerySet[SpendEntry], *fields: str) -> list[dict[str, Any]]:
    """The entries grouped by `fields`, largest list price first (one query)."""
    return list(
        entries.order_by()
        .values(*fields)
        .annotate(**_SUMS)
        .order_by("-listed", "-billed", *fields)[: BREAKDOWN_ROWS + 1]
    )


NO_TOKEN = "no token recorded"


def token_key(token_id: int | None, name: str | None, prefix: str | None) -> str:
    """How the breakdown names a token: its name and prefix (names need not be unique),
    or why it has none."""
    if token_id is None:
        return NO_TOKEN
    if name is None:
        return f"a deleted token (id {token_id})"
    return f"{name} ({prefix}…)"


def breakdown(window: WindowName, start: datetime, end: datetime) -> Breakdown:
    """The ledger entries of [start, end) by connection, by model and by token, each
    group with its requests, what it billed, its list price and what it saved (four
    queries)."""
    entries = SpendEntry.objects.filter(occurred_at__gte=start, occurred_at__lt=end)
    total = _row("total", entries.order_by().aggregate(**_SUMS))
    connections = _grouped(entries, "connection_id")
    models = _grouped(entries, "provider", "model")
    tokens = _grouped(entries, "token_id", "token__name", "token__prefix")
    return Breakdown(
        window=window,
        start=start,
        end=end,
        total=total,
        by_connection=[_row(r["connection_id"], r) for r in connections[:BREAKDOWN_ROWS]],
        by_model=[_row(f"{r['provider']}/{r['model']}", r) for r in models[:BREAKDOWN_ROWS]],
        are_connections_cut=len(connections) > BREAKDOWN_ROWS,
        are_models_cut=len(models) > BREAKDOWN_ROWS,
        by_token=[
            _row(token_key(r["token_id"], r["token__name"], r["token__prefix"]), r)
            for r in tokens[:BREAKDOWN_ROWS]
        ],
        are_tokens_cut=len(tokens) > BREAKDOWN_ROWS,
    )


def window_filters(window: WindowName, *, now: datetime) -> SpendFilters:
    """The ledger filters of the current or the previous budget window (one query: the
    settings), for the CSV download."""
    previous, current = budget_windows(load_config().budget_window, now)
    start, end = previous if window == "previous" else current
    return SpendFilters(since=start, until=end)


def spend_report(
    *,
    now: datetime,
    window: WindowName = "current",
    period: tuple[datetime, datetime] | None = None,
    config: LadderConfig | None = None,
) -> SpendReport:
    """The spend page at `now`: both windows day by day, the current window against the
    budgets, and the breakdown and days of `period` ([start, end) at UTC midnights;
    default: `window`) with the plans' utilisation over it, eight queries whatever the
    ledger or the readings hold or the period spans (seven when the caller read the
    settings already: `config`)."""
    config = config or load_config()
    (previous_start, _), (current_start, end) = budget_windows(config.budget_window, now)
    if period is None:
        period = (previous_start, current_start) if window == "previous" else (current_start, end)
    # One read of the day totals covers both windows and the period.
    totals = day_totals(min(previous_start, period[0]), max(end, period[1]))
    previous, current = spend_series(totals, config.budget_window, now)
    spent = {rung.label: current.spent_on(rung) for rung in PAID}
    summary = summarise_spend(config, spend_by_rung(spent, current.ends_at), now)
    shown = window_series(
        totals, period[0].date(), period[1].date(), utc_day(now), is_current=period[1] > now
    )
    return SpendReport(
        config=config,
        previous=previous,
        current=current,
        summary=dataclasses.replace(summary, saved_usd=current.saved_usd),
        breakdown=breakdown(window, period[0], period[1]),
        period=shown,
        plan_use=plan_use(period[0], period[1], now=now),
    )
