"""Forecasts, the shell: load a plan connection's newest readings and the paid rungs'
recent pace from the ledger, and hand them to the pure `ladder.core.forecast`.

Constant queries whatever the fleet: one for the newest `MAX_READINGS` readings of every
connection asked about, with the connection's fields (a window function), one for the
ledger's recent paid spend per rung (over the `(rung, occurred_at)` index), one for the
budget window's spend (the day totals) unless the caller has it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import F, Sum, Window
from django.db.models.functions import RowNumber

from billing.classify import Billing
from billing.services import load_catalog
from ladder.core import HysteresisState, LadderConfig, Rung
from ladder.core.forecast import (
    MAX_READINGS,
    Forecast,
    ForecastReading,
    PaidPace,
    forecast,
    forecast_sentence,
)
from ladder.models import Connection, QuotaReading, SpendEntry
from ladder.services.common import PAID_RUNGS
from ladder.services.config import load_config
from ladder.services.loading import spend_in_window


@dataclass(frozen=True, slots=True)
class ConnectionForecast:
    """One plan connection's forecast, with the name its sentence uses."""

    connection_id: str
    name: str
    forecast: Forecast
    sentence: str


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


_READING_FIELDS = ("checked_at", "remaining_percent", "reset_at")
_CONNECTION_FIELDS = (
    "connection__connection_id",
    "connection__label",
    "connection__provider",
    "connection__auth_type",
    "connection__hysteresis_state",
    "connection__hysteresis_since",
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
    readings: list[ForecastReading]


def _plans(rows: Iterable[Sequence[Any]]) -> list[_Plan]:
    plans: dict[str, _Plan] = {}
    for connection_id, label, provider, auth_type, state, since, checked, left, reset in rows:
        plan = plans.get(connection_id)
        if plan is None:
            dropped = since if state == HysteresisState.DROPPED_OUT else None
            plan = plans[connection_id] = _Plan(
                connection_id, label or connection_id, provider, auth_type, dropped, []
            )
        plan.readings.append(ForecastReading(checked, left, reset))
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
        made = forecast(
            plan.readings,
            now=now,
            exit_cutoff_percent=config.exit_cutoff_percent,
            dropped_out_since=plan.dropped_out_since,
            paid=paces,
            paid_lookback_minutes=lookback_minutes(),
        )
        if made is not None:
            result[plan.connection_id] = ConnectionForecast(
                plan.connection_id, plan.name, made, forecast_sentence(plan.name, made, now)
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


def forecast_json(item: ConnectionForecast | None) -> dict[str, object] | None:
    """The API's `forecast` object (spec/api.md, Status), or None."""
    if item is None:
        return None
    made = item.forecast
    paid = made.paid_until_reset_usd
    return {
        "runs_out_at": made.runs_out_at,
        "before_reset": made.before_reset,
        "paid_until_reset_usd": float(paid) if paid is not None else None,
        "basis": made.basis,
        "reset_at": made.reset_at,
        "paid_by_rung": {rung.label: float(usd) for rung, usd in made.paid_by_rung},
        "sentence": item.sentence,
    }


__all__ = [
    "ConnectionForecast",
    "forecast_json",
    "forecast_of",
    "paid_paces",
    "plan_forecasts",
]
