"""Forecasts, the shell: load a plan connection's newest readings and the paid rungs'
recent pace from the ledger, and hand them to the pure `ladder.core.forecast`: the
connection's binding window, and each window scoped to a model (from the same readings'
`windows`, the scope's drop-out from the connection's stored model scopes).

Constant queries whatever the fleet: one for the newest `MAX_READINGS` readings of every
connection asked about, with the connection's fields (a window function), one for the
ledger's recent paid spend per rung (over the `(rung, occurred_at)` index), one for the
budget window's spend (the day totals) unless the caller has it.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Sum, Window
from django.db.models.functions import RowNumber

from billing.classify import Billing
from billing.services import load_catalog
from ladder.core import HysteresisState, LadderConfig, Rung, WindowReading
from ladder.core.forecast import (
    MAX_READINGS,
    SAME_WINDOW_TOLERANCE,
    Forecast,
    ForecastReading,
    Outcome,
    PaidPace,
    forecast,
    forecast_sentence,
    judge,
)
from ladder.core.scopes import reserve_config
from ladder.models import Connection, QuotaReading, SpendEntry, WindowForecast
from ladder.services.common import PAID_RUNGS
from ladder.services.config import load_config
from ladder.services.forecast_scopes import (
    ScopeForecast,
    forecasts_per_scope,
    scoped_windows,
    scopes_dropped_out,
)
from ladder.services.loading import spend_in_window
from ladder.services.spend_ledger import _text as csv_text


@dataclass(frozen=True, slots=True)
class ConnectionForecast:
    """One plan connection's forecast, with the name its sentence uses, and one per
    model scope its readings carry a window for (sorted by scope)."""

    connection_id: str
    name: str
    forecast: Forecast
    sentence: str
    scopes: tuple[ScopeForecast, ...] = ()


def lookback_minutes() -> int:
    """How far back the ledger's paid pace is measured (FORECAST_PAID_LOOKBACK_MINUTES)."""
    return int(settings.FORECAST_PAID_LOOKBACK_MINUTES)


def paid_paces(
    config: LadderConfig, now: datetime, window_spent: Mapping[Rung, Decimal] | None = None
) -> list[PaidPace]:
    """Each paid rung's spend per minute over the lookback, and what its budget still
    allows in the current window: one query over the ledger's recent rows per rung, and
    one over the window's day totals unless the caller has them (`window_spent`)."""
    minutes = lookback_minutes()
    since = now - timedelta(minutes=minutes)
    totals = dict(
        SpendEntry.objects.filter(
            rung__in=[rung.label for rung in PAID_RUNGS],
            occurred_at__gt=since,
            occurred_at__lte=now,
        )
        .values_list("rung")
        .annotate(total=Sum("billed_usd"))
        .values_list("rung", "total")
    )
    if window_spent is None:
        window_spent = {
            rung: spent.spent_usd for rung, spent in spend_in_window(config, now).items()
        }
    paces = []
    for rung in PAID_RUNGS:
        budget = config.budget_for(rung)
        spent_in_window = window_spent.get(rung, Decimal(0))
        left = None if budget is None else max(budget - spent_in_window, Decimal(0))
        spent = Decimal(totals.get(rung.label) or 0)
        paces.append(PaidPace(rung, spent / minutes, left))
    return paces


_READING_FIELDS = ("checked_at", "remaining_percent", "reset_at", "windows")
_CONNECTION_FIELDS = (
    "connection__connection_id",
    "connection__label",
    "connection__provider",
    "connection__auth_type",
    "connection__hysteresis_state",
    "connection__hysteresis_since",
    "connection__exit_cutoff_percent",
    "connection__scoped_state",
)


def _newest_rows(**where: Any) -> Any:
    """The newest `MAX_READINGS` readings of each connection matching `where` (with the
    connection's fields), in one query: a row number per connection, newest first."""
    return (
        QuotaReading.objects.filter(**where)
        .annotate(
            newest=Window(
                RowNumber(),
                partition_by=[F("connection_id")],
                order_by=[F("checked_at").desc(), F("id").desc()],
            )
        )
        .filter(newest__lte=MAX_READINGS)
        .values_list(*_CONNECTION_FIELDS, *_READING_FIELDS)
    )


@dataclass(slots=True)
class _Plan:
    connection_id: str
    name: str
    provider: str
    auth_type: str
    dropped_out_since: datetime | None
    # The connection's own exit cutoff (its reserve; None: the settings').
    exit_cutoff_percent: float | None
    # Since when each model scope that has dropped out has (its stored hysteresis).
    scopes_dropped_out_since: dict[str, datetime]
    readings: list[ForecastReading]
    windows: list[tuple[datetime, list[WindowReading]]]


def _plans(rows: Iterable[Sequence[Any]]) -> list[_Plan]:
    plans: dict[str, _Plan] = {}
    for connection_id, label, provider, auth_type, state, since, cutoff, scoped, *reading in rows:
        checked, left, reset, windows = reading
        plan = plans.get(connection_id)
        if plan is None:
            dropped = since if state == HysteresisState.DROPPED_OUT else None
            plan = plans[connection_id] = _Plan(
                connection_id,
                label or connection_id,
                provider,
                auth_type,
                dropped,
                cutoff,
                scopes_dropped_out(scoped),
                [],
                [],
            )
        plan.readings.append(ForecastReading(checked, left, reset))
        plan.windows.append((checked, scoped_windows(windows)))
    return list(plans.values())


def _forecasts(
    plans: Iterable[_Plan],
    *,
    now: datetime,
    config: LadderConfig,
    paces: Sequence[PaidPace],
) -> dict[str, ConnectionForecast]:
    result = {}
    for plan in plans:
        # Run-out is where the ladder stops using this plan: its own reserve's exit cutoff
        # where it sets one (spec/ladder.md, a connection's own reserve).
        cutoff = reserve_config(config, plan.exit_cutoff_percent, None).exit_cutoff_percent
        made = forecast(
            plan.readings,
            now=now,
            exit_cutoff_percent=cutoff,
            dropped_out_since=plan.dropped_out_since,
            paid=paces,
            paid_lookback_minutes=lookback_minutes(),
        )
        if made is None:
            continue
        scopes = forecasts_per_scope(
            plan.windows,
            name=plan.name,
            now=now,
            exit_cutoff_percent=cutoff,
            dropped_out_since=plan.scopes_dropped_out_since,
            paces=paces,
            lookback_minutes=lookback_minutes(),
        )
        result[plan.connection_id] = ConnectionForecast(
            plan.connection_id, plan.name, made, forecast_sentence(plan.name, made, now), scopes
        )
    return result


def is_plan(is_active: bool, billing: Billing) -> bool:
    """Whether a connection has a forecast: an active plan (billing `subscription`)."""
    return is_active and billing == Billing.SUBSCRIPTION


def forecast_of(
    connection: Connection,
    *,
    now: datetime,
    config: LadderConfig | None = None,
    billing: Billing | None = None,
) -> ConnectionForecast | None:
    """One connection's forecast (None: not an active plan, or never read): three
    queries (its readings, the ledger's pace, the window's spend), and the catalog and
    the settings when the caller has not got them."""
    if billing is None:
        billing = load_catalog().classify(connection.provider, connection.auth_type).billing
    if not is_plan(connection.is_active, billing):
        return None
    plans = _plans(_newest_rows(connection=connection))
    config = config or load_config()
    # The pace is read even for a plan never read, so a page's queries do not depend on
    # whether its plan has readings yet.
    made = _forecasts(plans, now=now, config=config, paces=paid_paces(config, now))
    return made.get(connection.connection_id)


def plan_forecasts(
    *,
    now: datetime,
    config: LadderConfig | None = None,
    window_spent: Mapping[Rung, Decimal] | None = None,
) -> list[ConnectionForecast]:
    """Every active plan connection's forecast, soonest run-out first (those without an
    instant last): the overview's and the notifications' list. Three queries whatever
    the fleet (the newest readings of every active connection with its fields, the
    catalog, the ledger's pace), and the settings and the window's spend when the caller
    has not got them."""
    rows = _newest_rows(connection__is_active=True)
    catalog = load_catalog()
    plans = [
        plan
        for plan in _plans(rows)
        if catalog.classify(plan.provider, plan.auth_type).billing == Billing.SUBSCRIPTION
    ]
    if not plans:
        return []
    config = config or load_config()
    made = _forecasts(plans, now=now, config=config, paces=paid_paces(config, now, window_spent))

    def order(item: ConnectionForecast) -> tuple[int, datetime, str]:
        at = item.forecast.runs_out_at
        return (0, at, item.connection_id) if at is not None else (1, now, item.connection_id)

    return sorted(made.values(), key=order)


# --- forecast against outcome ----------------------------------------------------------------


def record_forecasts(*, now: datetime) -> int:
    """Keep each window's first forecast and its outcome: a new window of a plan that is
    forecast (and has not run out) gets a row; a row whose plan has run out gets the
    instant; a row whose reset has passed is closed. Returns the rows created. A fixed
    number of queries whatever the fleet, and safe to run twice (the unique window)."""
    made = [
        item
        for item in plan_forecasts(now=now)
        if item.forecast.runs_out_at is not None and item.forecast.reset_at is not None
    ]
    ids = [item.connection_id for item in made]
    pks = dict(Connection.objects.filter(connection_id__in=ids).values_list("connection_id", "pk"))
    open_rows: dict[int, list[WindowForecast]] = {}
    still_open = WindowForecast.objects.filter(
        closed_at__isnull=True, connection_id__in=pks.values()
    )
    for open_row in still_open:
        open_rows.setdefault(open_row.connection_id, []).append(open_row)
    created: list[WindowForecast] = []
    with transaction.atomic():
        for item in made:
            made_forecast = item.forecast
            reset_at, runs_out_at = made_forecast.reset_at, made_forecast.runs_out_at
            assert reset_at is not None
            assert runs_out_at is not None
            pk = pks.get(item.connection_id)
            if pk is None:
                continue
            row: WindowForecast | None = next(
                (
                    r
                    for r in open_rows.get(pk, [])
                    if abs(r.window_reset_at - reset_at) < SAME_WINDOW_TOLERANCE
                ),
                None,
            )
            if row is None:
                if not made_forecast.has_run_out:  # a forecast ahead of the run-out only
                    created.append(
                        WindowForecast(
                            connection_id=pk,
                            window_reset_at=reset_at,
                            forecast_at=now,
                            runs_out_at=runs_out_at,
                            before_reset=bool(made_forecast.before_reset),
                            paid_until_reset_usd=made_forecast.paid_until_reset_usd,
                            basis=made_forecast.basis[:300],
                        )
                    )
            elif made_forecast.has_run_out and row.ran_out_at is None:
                row.ran_out_at = runs_out_at
                row.save(update_fields=["ran_out_at"])
        WindowForecast.objects.bulk_create(created, ignore_conflicts=True)
        WindowForecast.objects.filter(closed_at__isnull=True, window_reset_at__lte=now).update(
            closed_at=now
        )
    return len(created)


@dataclass(frozen=True, slots=True)
class ForecastOutcome:
    """One window's first forecast against what happened."""

    connection_id: str
    window_reset_at: datetime
    forecast_at: datetime
    runs_out_at: datetime
    before_reset: bool
    paid_until_reset_usd: Decimal | None
    basis: str
    ran_out_at: datetime | None
    is_closed: bool
    outcome: Outcome
    error_seconds: float | None


def _outcome_of(row: WindowForecast, connection_id: str) -> ForecastOutcome:
    outcome, error = judge(
        before_reset=row.before_reset,
        runs_out_at=row.runs_out_at,
        ran_out_at=row.ran_out_at,
        is_closed=row.closed_at is not None,
    )
    return ForecastOutcome(
        connection_id=connection_id,
        window_reset_at=row.window_reset_at,
        forecast_at=row.forecast_at,
        runs_out_at=row.runs_out_at,
        before_reset=row.before_reset,
        paid_until_reset_usd=row.paid_until_reset_usd,
        basis=row.basis,
        ran_out_at=row.ran_out_at,
        is_closed=row.closed_at is not None,
        outcome=outcome,
        error_seconds=error,
    )


OUTCOME_WINDOWS = 10


def forecast_outcomes(
    connection_id: str | None = None, *, windows: int = OUTCOME_WINDOWS
) -> list[ForecastOutcome]:
    """The last `windows` windows of each connection (or of one), newest first: one
    query whatever the fleet (a row number per connection)."""
    rows = WindowForecast.objects.annotate(
        newest=Window(
            RowNumber(),
            partition_by=[F("connection_id")],
            order_by=[F("window_reset_at").desc(), F("id").desc()],
        )
    ).filter(newest__lte=windows)
    if connection_id is not None:
        rows = rows.filter(connection__connection_id=connection_id)
    rows = rows.select_related("connection").order_by(
        "connection__connection_id", "-window_reset_at", "-id"
    )
    return [_outcome_of(row, row.connection.connection_id) for row in rows]


OUTCOME_CSV_HEADER = (
    "connection_id",
    "window_reset_at",
    "forecast_at",
    "runs_out_at",
    "before_reset",
    "paid_until_reset_usd",
    "ran_out_at",
    "closed",
    "outcome",
    "error_seconds",
    "basis",
)


def _instant(value: datetime | None) -> str:
    return "" if value is None else value.isoformat().replace("+00:00", "Z")


def outcomes_csv(outcomes: Sequence[ForecastOutcome]) -> str:
    """Forecast against outcome as CSV (CRLF, a header row; a cell a spreadsheet would run
    as a formula gets a leading apostrophe): the API's `?format=csv`."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(OUTCOME_CSV_HEADER)
    for o in outcomes:
        writer.writerow(
            (
                csv_text(o.connection_id),
                _instant(o.window_reset_at),
                _instant(o.forecast_at),
                _instant(o.runs_out_at),
                "true" if o.before_reset else "false",
                "" if o.paid_until_reset_usd is None else format(o.paid_until_reset_usd, "f"),
                _instant(o.ran_out_at),
                "true" if o.is_closed else "false",
                o.outcome.value,
                "" if o.error_seconds is None else f"{o.error_seconds:.0f}",
                csv_text(o.basis),
            )
        )
    return out.getvalue()


def outcome_json(o: ForecastOutcome) -> dict[str, object]:
    """One window's forecast against outcome, as the API answers it."""
    return {
        "connection_id": o.connection_id,
        "window_reset_at": o.window_reset_at,
        "forecast_at": o.forecast_at,
        "runs_out_at": o.runs_out_at,
        "before_reset": o.before_reset,
        "paid_until_reset_usd": None
        if o.paid_until_reset_usd is None
        else float(o.paid_until_reset_usd),
        "basis": o.basis,
        "ran_out_at": o.ran_out_at,
        "closed": o.is_closed,
        "outcome": o.outcome.value,
        "error_seconds": o.error_seconds,
    }


def _forecast_fields(made: Forecast, sentence: str) -> dict[str, object]:
    paid = made.paid_until_reset_usd
    return {
        "runs_out_at": made.runs_out_at,
        "before_reset": made.before_reset,
        "paid_until_reset_usd": float(paid) if paid is not None else None,
        "basis": made.basis,
        "reset_at": made.reset_at,
        "paid_by_rung": {rung.label: float(usd) for rung, usd in made.paid_by_rung},
        "sentence": sentence,
    }


def forecast_json(item: ConnectionForecast | None) -> dict[str, object] | None:
    """The API's `forecast` object (spec/api.md, Status), or None; `scopes` holds one
    per model scope, each with the same fields and its `model_scope`."""
    if item is None:
        return None
    return {
        **_forecast_fields(item.forecast, item.sentence),
        "scopes": [
            {
                "model_scope": scoped.model_scope,
                **_forecast_fields(scoped.forecast, scoped.sentence),
            }
            for scoped in item.scopes
        ],
    }


__all__ = [
    "ConnectionForecast",
    "ScopeForecast",
    "forecast_json",
    "forecast_of",
    "paid_paces",
    "plan_forecasts",
]
