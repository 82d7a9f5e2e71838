"""Read helpers for the dashboard. Each runs a fixed number of queries, whatever the
number of connections, so a page's query count does not grow with the world it shows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max, Min, Q
from django.utils import timezone

from ladder import core
from ladder.core import AutoId, CandidateIn, Decision
from ladder.models import Connection, HysteresisTransition, QuotaReading
from ladder.services.loading import (
    load_decision_inputs,
    load_views,
    referenced_connections,
    registered_candidates,
    tiers_of,
)


def published_auto_ids(candidates: Sequence[CandidateIn]) -> list[AutoId]:
    """The flat auto ids, then both composites of each category a candidate lists."""
    categories = sorted({category for candidate in candidates for category in candidate.categories})
    auto_ids = list(core.ADVERTISED_AUTO_IDS)
    for category in categories:
        try:
            auto_ids += [AutoId(grouping, category) for grouping in core.Grouping]
        except core.InvalidAutoId:  # a category no auto id can name is not published
            continue
    return auto_ids


def decide_published(*, now: datetime | None = None) -> list[Decision]:
    """The decision of every published auto id over the registered candidates, at one
    `now`, loading candidates, inputs and connections once (six queries however many
    auto ids). Each decision equals `decide_registered`'s for that id (tests pin it)."""
    now = now or timezone.now()
    candidates = registered_candidates()
    inputs = load_decision_inputs(now)
    tiers = tiers_of(candidates, inputs.prices, inputs.config)
    views = load_views(referenced_connections(candidates), inputs.catalog)
    return [
        core.decide(
            auto_id,
            candidates,
            views,
            tiers,
            inputs.spend,
            inputs.config,
            now,
            known_models=inputs.prices.model_names,
        )
        for auto_id in published_auto_ids(candidates)
    ]


@dataclass(frozen=True, slots=True)
class ReadingHealth:
    """How fresh the polled readings are, and the next known reset (one query)."""

    polled_connections: int
    polled_with_reading: int
    newest_polled_reading_at: datetime | None
    next_reset_at: datetime | None


def reading_health(*, now: datetime) -> ReadingHealth:
    """Newest current reading of any polled connection (a worker or broker outage shows as
    this going stale) and the earliest future reset of any current reading (one query)."""
    polled = ~Q(quota_source__in=core.UNPOLLED_QUOTA_SOURCES)
    totals = Connection.objects.aggregate(
        polled=Count("pk", filter=polled),
        polled_read=Count("current_reading", filter=polled),
        newest=Max("current_reading__checked_at", filter=polled),
        next_reset=Min("current_reading__reset_at", filter=Q(current_reading__reset_at__gt=now)),
    )
    return ReadingHealth(
        polled_connections=totals["polled"],
        polled_with_reading=totals["polled_read"],
        newest_polled_reading_at=totals["newest"],
        next_reset_at=totals["next_reset"],
    )


def reading_history(connection: Connection, *, since: datetime) -> list[QuotaReading]:
    """The connection's readings checked since `since`, oldest first (one query)."""
    return list(
        QuotaReading.objects.filter(connection=connection, checked_at__gte=since).order_by(
            "checked_at", "id"
        )
    )


def transition_history(connection: Connection, *, since: datetime) -> list[HysteresisTransition]:
    """The connection's hysteresis transitions since `since`, newest first (one query)."""
    return list(HysteresisTransition.objects.filter(connection=connection, at__gte=since))
