"""Prometheus metrics. Counters and the latency histogram live in this process; gauges
(per connection, per rung, the tuning) are computed from the database at scrape time in a
constant number of queries, so every web process reports the same values for them.
Labels are bounded: connection ids, providers and auth types are operator data, rungs and
billing classes are enums, and no label ever holds a request-supplied string.
docs/ops/README.md documents every metric."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING

from django.utils import timezone
from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ladder import core
from ladder.core import AutoId, Grouping, HysteresisState, Rung

if TYPE_CHECKING:
    from ladder.services import OperationsState

# `*_created` series only add noise to a scrape.
disable_created_metrics()
REGISTRY = CollectorRegistry(auto_describe=False)

DECISIONS = Counter(
    "omniroute_decisions",
    "Pool decisions by auto id and outcome (served: at least one candidate; empty: none).",
    ["auto_id", "outcome"],
    registry=REGISTRY,
)
DECISION_SECONDS = Histogram(
    "omniroute_decision_seconds",
    "Time to build one pool decision, from request parse to response body.",
    buckets=(0.001, 0.002, 0.005, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
    registry=REGISTRY,
)
EVENTS = Counter(
    "omniroute_gateway_events",
    "Gateway events by kind.",
    ["kind"],
    registry=REGISTRY,
)
LOGIN_THROTTLE_UNAVAILABLE = Counter(
    "omniroute_login_throttle_unavailable",
    "Sign-in attempts let through unthrottled because the cache holding the failure "
    "counts did not answer (ladder/web/login_throttle.py).",
    registry=REGISTRY,
)


def auto_id_label(auto_id: AutoId) -> str:
    """The metric label of an auto id. Categories come from request bodies, so only the
    registered ones are named; any other composite counts as auto/<other>:<tier>,
    keeping the number of series bounded."""
    from ladder.services import registered_categories

    if auto_id.category is None or auto_id.category in registered_categories():
        return auto_id.auto_id
    return f"auto/<other>:{auto_id.grouping.value}"


class DatabaseCollector(Collector):
    """The gauges computed from the database at scrape time: per connection, per rung,
    the tuning they are judged against and the beat's heartbeat."""

    def __init__(self, now: datetime | None = None) -> None:
        self._now = now

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from ladder import services

        state = services.operations_state(now=self._now or timezone.now())
        yield from connection_families(state)
        yield from rung_families(state)
        yield from tuning_families(state)
        yield from forecast_families(state)
        yield from _beat_metrics(state.now)


def _flag(value: bool) -> float:
    return 1.0 if value else 0.0


def connection_families(state: OperationsState) -> Iterator[GaugeMetricFamily]:
    """Per registered connection (label `connection_id`, the operator's own id)."""
    now = state.now
    label = ["connection_id"]
    info = GaugeMetricFamily(
        "omniroute_connection_info",
        "Always 1: a registered connection with its provider, auth type, billing class "
        "from the catalog (subscription, keyless, metered, unknown = uncurated) and quota "
        "source (none: only pushed readings); join on connection_id to filter the others.",
        labels=["connection_id", "provider", "auth_type", "billing", "quota_source"],
    )
    remaining = GaugeMetricFamily(
        "omniroute_connection_remaining_percent",
        "Quota left in the connection's current reading, 0 to 100, fresh or not (absent: "
        "never read, or the reading does not say).",
        labels=label,
    )
    in_play = GaugeMetricFamily(
        "omniroute_connection_in_play",
        "Hysteresis state: 1 in play, 0 dropped out (at or below the exit cutoff, or "
        "reported EXHAUSTED, and not yet refilled past the re-entry floor).",
        labels=label,
    )
    current = GaugeMetricFamily(
        "omniroute_connection_reading_current",
        "1 when the connection has a current reading that is not stale (not older than "
        "the maximum state age, its reset not passed); 0 when stale or never read.",
        labels=label,
    )
    cooling = GaugeMetricFamily(
        "omniroute_connection_cooling_down",
        "1 while the connection cools down after a gateway-reported failure, else 0.",
        labels=label,
    )
    cooldown_left = GaugeMetricFamily(
        "omniroute_connection_cooldown_remaining_seconds",
        "Seconds until the connection's cooldown ends (0 when not cooling down).",
        labels=label,
    )
    age = GaugeMetricFamily(
        "omniroute_reading_age_seconds",
        "Age of each connection's current quota reading (absent: never read).",
        labels=label,
    )
    for connection in state.connections:
        view = connection.view
        ids = [view.connection_id]
        info.add_metric(
            [
                view.connection_id,
                view.provider,
                view.auth_type or "",
                view.billing.billing.value,
                connection.quota_source,
            ],
            1.0,
        )
        in_play.add_metric(ids, _flag(view.hysteresis.state is HysteresisState.IN_PLAY))
        reading = view.reading
        current.add_metric(
            ids, _flag(reading is not None and core.is_reading_current(reading, state.config, now))
        )
        if reading is not None:
            age.add_metric(ids, (now - reading.checked_at).total_seconds())
            if reading.remaining_percent is not None:
                remaining.add_metric(ids, float(reading.remaining_percent))
        until = view.cooldown_until
        left = (until - now).total_seconds() if until is not None and until > now else 0.0
        cooling.add_metric(ids, _flag(left > 0))
        cooldown_left.add_metric(ids, left)
    yield from (info, remaining, in_play, current, cooling, cooldown_left, age)


def rung_families(state: OperationsState) -> Iterator[GaugeMetricFamily]:
    """Per rung (label `rung`): usable connections, spend and budget in the window."""
    usable = GaugeMetricFamily(
        "omniroute_rung_usable_connections",
        "Distinct connections serving at least one entry on the rung in the decision of "
        "the flat auto id (auto/subscription only ever fills the subscription rung).",
        labels=["auto_id", "rung"],
    )
    for decision in state.decisions:
        counts = core.usable_connections(decision)
        auto_id = decision.auto_id
        rungs = (Rung.SUBSCRIPTION,) if auto_id.grouping is Grouping.SUBSCRIPTION else tuple(Rung)
        for rung in rungs:
            usable.add_metric([auto_id.auto_id, rung.label], float(counts[rung]))
    yield usable
    spent = GaugeMetricFamily(
        "omniroute_rung_spend_usd",
        "Spend recorded for each paid rung in the current budget window.",
        labels=["rung"],
    )
    budget = GaugeMetricFamily(
        "omniroute_rung_budget_usd",
        "Budget of each paid rung (absent: no budget, never gated; 0: the rung is disabled).",
        labels=["rung"],
    )
    used = GaugeMetricFamily(
        "omniroute_rung_budget_used_percent",
        "Spend in the current window as a percent of the paid rung's budget; 100 or more: "
        "the rung is gated until the window ends (absent: no budget, or a budget of 0).",
        labels=["rung"],
    )
    for name, rung_budget in state.spend.rungs.items():
        spent.add_metric([name], float(rung_budget.spent_usd))
        if rung_budget.budget_usd is not None:
            budget.add_metric([name], float(rung_budget.budget_usd))
            if rung_budget.budget_usd > 0:
                used.add_metric([name], float(rung_budget.spent_usd * 100 / rung_budget.budget_usd))
    yield from (spent, budget, used)


def forecast_families(state: OperationsState) -> Iterator[GaugeMetricFamily]:
    """Forecast against outcome (docs/FORECASTS.md): per plan connection, the error of
    its newest window that ran out, and its last windows by outcome."""
    error = GaugeMetricFamily(
        "omniroute_forecast_error_seconds",
        "When the newest window that ran out did so, minus when its first forecast said it "
        "would (positive: later than forecast); absent until a forecast window runs out.",
        labels=["connection_id"],
    )
    windows = GaugeMetricFamily(
        "omniroute_forecast_windows",
        "The last (up to 10) forecast windows of each plan connection by outcome: "
        "ran_out_as_forecast, did_not_run_out, ran_out_unforecast, held_as_forecast, open.",
        labels=["connection_id", "outcome"],
    )
    newest_error: dict[str, float] = {}
    counts: dict[tuple[str, str], int] = {}
    for outcome in state.forecast_outcomes:  # newest first per connection
        key = (outcome.connection_id, outcome.outcome.value)
        counts[key] = counts.get(key, 0) + 1
        if outcome.error_seconds is not None:
            newest_error.setdefault(outcome.connection_id, outcome.error_seconds)
    for connection_id, seconds in sorted(newest_error.items()):
        error.add_metric([connection_id], seconds)
    for (connection_id, outcome_value), count in sorted(counts.items()):
        windows.add_metric([connection_id, outcome_value], float(count))
    yield from (error, windows)


def tuning_families(state: OperationsState) -> Iterator[GaugeMetricFamily]:
    """The settings the per-connection gauges are judged against (no labels)."""
    config = state.config
    yield GaugeMetricFamily(
        "omniroute_exit_cutoff_percent",
        "Exit cutoff: a connection at or below this remaining percent drops out.",
        value=config.exit_cutoff_percent,
    )
    yield GaugeMetricFamily(
        "omniroute_max_reading_age_seconds",
        "Maximum state age: a reading older than this is stale (unless EXHAUSTED until a "
        "future reset).",
        value=float(config.max_state_age_seconds),
    )


def _beat_metrics(now: datetime) -> Iterator[GaugeMetricFamily]:
    """The beat's heartbeat: when it last ran, how old that is, and the limit."""
    from ladder import beat

    health = beat.current_health(now)
    last_run = GaugeMetricFamily(
        "omniroute_beat_last_run_timestamp_seconds",
        "Unix time of the beat's last heartbeat (absent: none yet).",
    )
    age = GaugeMetricFamily(
        "omniroute_beat_heartbeat_age_seconds",
        "Age of the beat's last heartbeat (absent: none yet); due scans stop when it climbs.",
    )
    if health.last_run_at is not None and health.age_seconds is not None:
        last_run.add_metric([], health.last_run_at.timestamp())
        age.add_metric([], health.age_seconds)
    yield last_run
    yield age
    yield GaugeMetricFamily(
        "omniroute_beat_heartbeat_max_age_seconds",
        "Heartbeat age past which /readyz reports the beat down.",
        value=health.max_age_seconds,
    )


REGISTRY.register(DatabaseCollector())
