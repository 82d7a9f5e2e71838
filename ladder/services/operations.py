"""What /metrics reports from the database: connections, spend and the flat auto ids'
decisions, all as of one `now`, in a constant number of queries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from billing import services as billing_services
from ladder import core
from ladder.core import ConnectionView, Decision, LadderConfig
from ladder.models import Connection
from ladder.services.config import load_config
from ladder.services.forecasts import ForecastOutcome, forecast_outcomes
from ladder.services.loading import (
    VIEW_FIELDS,
    registered_candidates,
    spend_in_window,
    tiers_of,
    views_of_rows,
)
from ladder.services.spend import SpendSummary, summarise_spend


@dataclass(frozen=True, slots=True)
class ConnectionState:
    """One registered connection as the operations metrics report it."""

    view: ConnectionView
    quota_source: str


@dataclass(frozen=True, slots=True)
class OperationsState:
    """What /metrics reports from the database, all as of one `now`."""

    now: datetime
    config: LadderConfig
    connections: tuple[ConnectionState, ...]
    spend: SpendSummary
    # The decisions of the flat auto ids over the registered candidates: every composite
    # is a category subset of one of them, so they see every usable connection.
    decisions: tuple[Decision, ...]
    # Forecast against outcome: the last windows of each plan connection, newest first.
    forecast_outcomes: tuple[ForecastOutcome, ...] = ()


def operations_state(*, now: datetime) -> OperationsState:
    """Connections, window spend, the flat auto ids' decisions and forecast against
    outcome at `now`, in seven queries whatever the number of connections and candidates."""
    config = load_config()
    catalog = billing_services.load_catalog()
    prices = billing_services.load_price_book()
    spend = spend_in_window(config, now)
    rows = list(Connection.objects.values_list(*VIEW_FIELDS, "quota_source"))
    fields = len(VIEW_FIELDS)
    views = views_of_rows((row[:fields] for row in rows), catalog)
    candidates = registered_candidates()
    tiers = tiers_of(candidates, prices, config)
    # The registered views stand for every referenced id; `core.decide` treats an id
    # never registered as uncurated, exactly as `load_views` does.
    decisions = tuple(
        core.decide(
            auto_id,
            candidates,
            views,
            tiers,
            spend,
            config,
            now,
            known_models=prices.model_names,
        )
        for auto_id in core.ADVERTISED_AUTO_IDS
    )
    return OperationsState(
        now=now,
        config=config,
        connections=tuple(
            ConnectionState(view=views[row[0]], quota_source=row[-1] or core.NO_QUOTA_SOURCE)
            for row in rows
        ),
        spend=summarise_spend(config, spend, now),
        decisions=decisions,
        forecast_outcomes=tuple(forecast_outcomes()),
    )
