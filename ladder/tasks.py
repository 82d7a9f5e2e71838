"""Thin Celery tasks: load, call a service, log. Each is idempotent (running one twice
is harmless), acks late and has time limits because it does IO."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from celery import Task, shared_task
from celery.signals import after_task_publish
from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from ladder import beat, services
from ladder.services import (
    decisions,
    ledger_replays,
    notifications,
    simulations,
    timeline,
    webhook_delivery,
)

logger = logging.getLogger(__name__)


@shared_task(
    bind=True,
    acks_late=True,
    soft_time_limit=20,
    time_limit=30,
    ignore_result=True,
    max_retries=60,
)
def refresh_connection_task(
    self: Task, *, connection_id: str, requested_at: str | None = None
) -> None:
    """Poll one connection's quota source and store the reading."""
    requested = datetime.fromisoformat(requested_at) if requested_at else None
    outcome = services.refresh_quota(connection_id, requested_at=requested)
    logger.info("refresh %s: %s", connection_id, "polled" if outcome.polled else outcome.why)
    if outcome.is_at_capacity:
        raise self.retry(countdown=1)


@shared_task(acks_late=True, soft_time_limit=20, time_limit=30, ignore_result=True)
def enqueue_due_refreshes_task() -> None:
    """Enqueue a refresh for every connection whose reading is due."""
    config = services.load_config()
    now = timezone.now()
    due = services.due_connection_ids(
        now,
        interval=timedelta(seconds=settings.QUOTA_REFRESH_INTERVAL_SECONDS),
        max_state_age=timedelta(seconds=config.max_state_age_seconds),
    )
    for connection_id in due:
        refresh_connection_task.apply_async(
            kwargs={"connection_id": connection_id, "requested_at": now.isoformat()},
            expires=settings.QUOTA_REFRESH_INTERVAL_SECONDS,
        )
    if due:
        logger.info("enqueued %d due refreshes", len(due))


@shared_task(soft_time_limit=5, time_limit=10, ignore_result=True)
def record_beat_heartbeat_task() -> None:
    """Stamp the beat's heartbeat: the beat sends this every beat period (ladder/beat.py).
    Not acks_late: a lost heartbeat loses nothing, the next one follows within a period."""
    beat.record_heartbeat(timezone.now())


@after_task_publish.connect
def stamp_heartbeat_sent(sender: str | None = None, **kwargs: Any) -> None:
    """In the process that published it (the beat): the heartbeat is in the broker, so
    the beat runs and the broker takes its messages, whether or not a worker runs it."""
    if sender != record_beat_heartbeat_task.name:
        return
    try:
        beat.record_sent(timezone.now())
    except DatabaseError as error:  # the beat keeps scheduling without its stamp
        logger.warning("could not stamp the heartbeat as sent: %s", type(error).__name__)
        connection.close()  # a new one at the next heartbeat (the database may have restarted)


@shared_task(acks_late=True, soft_time_limit=60, time_limit=90, ignore_result=True)
def prune_readings_task() -> None:
    """Delete readings older than the retention period (never a current one)."""
    cutoff = timezone.now() - timedelta(days=settings.QUOTA_READING_RETENTION_DAYS)
    deleted = services.prune_readings(older_than=cutoff)
    logger.info("pruned %d readings older than %s", deleted, cutoff.isoformat())
    deleted = timeline.prune_transitions(older_than=cutoff)
    logger.info("pruned %d pool transitions older than %s", deleted, cutoff.isoformat())
    deleted = services.prune_budget_crossings(older_than=cutoff)
    logger.info("pruned %d budget crossings older than %s", deleted, cutoff.isoformat())


@shared_task(acks_late=True, soft_time_limit=20, time_limit=30, ignore_result=True)
def record_pool_timeline_task() -> None:
    """Decide the published pools so that changes time alone makes are recorded even
    when no gateway asks (ladder.services.timeline; a cached decision costs one query)."""
    decisions.record_published(now=timezone.now())


@shared_task(acks_late=True, soft_time_limit=20, time_limit=30, ignore_result=True)
def record_forecasts_task() -> None:
    """Keep each plan window's first forecast and its outcome (idempotent: the window is
    unique per connection)."""
    created = services.record_forecasts(now=timezone.now())
    if created:
        logger.info("forecasts: %d new window(s) recorded", created)


@shared_task(acks_late=True, soft_time_limit=20, time_limit=30, ignore_result=True)
def evaluate_notifications_task() -> None:
    """Notify the transitions since the last evaluation; re-enqueue lost deliveries."""
    created = notifications.evaluate_notifications()
    requeued = notifications.requeue_overdue_deliveries()
    if created or requeued:
        logger.info("notifications: %d queued, %d re-queued", len(created), len(requeued))


# Attempts, backoff and their limit live in the delivery row (NOTIFY_MAX_ATTEMPTS): the
# task only schedules the next attempt the service asks for. The hard time limit is
# shorter than an attempt's lease, so a killed attempt is never mistaken for a live one.
@shared_task(
    bind=True,
    acks_late=True,
    soft_time_limit=60,
    time_limit=90,
    ignore_result=True,
    max_retries=25,
)
def deliver_notification_task(self: Task, *, delivery_id: str) -> None:
    """Make the next attempt of one notification delivery (idempotent: re-checked under
    the delivery's row lock; a delivered one is never sent again)."""
    outcome = webhook_delivery.deliver(delivery_id)
    logger.info("notification %s: %s", delivery_id, outcome.why)
    if outcome.retry_in is not None:
        raise self.retry(countdown=outcome.retry_in)


# Not acks_late: a run interrupted by a dying worker is not replayed behind the user's
# back; it stops reporting progress and is given up (simulations.STALE_AFTER, longer
# than the hard limit), and the operator starts a new one.
@shared_task(soft_time_limit=300, time_limit=330, ignore_result=True)
def run_simulation_task(*, run_id: int) -> None:
    """Run one what-if simulation started from the dashboard (progress in its row)."""
    state = simulations.run_simulation(run_id)
    logger.info("simulation %s: %s", run_id, state)


# Not acks_late, like a simulation: an interrupted replay is given up, not replayed.
@shared_task(soft_time_limit=300, time_limit=330, ignore_result=True)
def run_ledger_replay_task(*, run_id: int) -> None:
    """Run one ledger replay ("what a different purchase would have saved"; progress in
    its row)."""
    state = ledger_replays.run_replay(run_id)
    logger.info("ledger replay %s: %s", run_id, state)
