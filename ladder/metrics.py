"""Prometheus metrics. Counters and the latency histogram live in this process; gauges
(reading age, spend against budget) are computed from the database at scrape time, so
every web process reports the same values for them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from django.utils import timezone
from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ladder.rules import AutoId

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


def auto_id_label(auto_id: AutoId) -> str:
    """The metric label of an auto id. Categories come from request bodies, so only the
    registered ones are named; any other composite counts as auto/<other>:<tier>,
    keeping the number of series bounded."""
    from ladder.services import registered_categories

    if auto_id.category is None or auto_id.category in registered_categories():
        return auto_id.auto_id
    return f"auto/<other>:{auto_id.grouping.value}"


class DatabaseCollector(Collector):
    """Reading age per connection, spend against budget per paid rung and the beat's
    heartbeat."""

    def __init__(self, now: datetime | None = None) -> None:
        self._now = now

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from ladder import services
        from ladder.models import Connection

        now = self._now or timezone.now()
        age = GaugeMetricFamily(
            "omniroute_reading_age_seconds",
            "Age of each connection's current quota reading (absent: never read).",
            labels=["connection_id"],
        )
        for connection_id, checked_at in Connection.objects.filter(
            current_reading__isnull=False
        ).values_list("connection_id", "current_reading__checked_at"):
            age.add_metric([connection_id], (now - checked_at).total_seconds())
        yield age
        summary = services.spend_summary(now=now)
        spent = GaugeMetricFamily(
            "omniroute_rung_spend_usd",
            "Spend recorded for each paid rung in the current budget window.",
            labels=["rung"],
        )
        budget = GaugeMetricFamily(
            "omniroute_rung_budget_usd",
            "Budget of each paid rung (absent: no budget, never gated).",
            labels=["rung"],
        )
        for name, rung in summary.rungs.items():
            spent.add_metric([name], float(rung.spent_usd))
            if rung.budget_usd is not None:
                budget.add_metric([name], float(rung.budget_usd))
        yield spent
        yield budget
        yield from _beat_metrics(now)


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
