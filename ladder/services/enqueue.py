"""The one place the shell talks to the broker: it enqueues background work by the
task's registered name, and says whether the broker answers. The shell imports neither
`ladder.tasks` (tasks call the shell, and the dependency points one way), so a task is
named here, not imported, nor the project's Celery app (the project sits on top): the app
is Celery's current one, which `omniroute_admin` sets when Django loads it."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Final

from celery import current_app as app
from django.conf import settings

from ladder import core
from ladder.models import Connection
from ladder.services.common import logger

# The name Celery registers `ladder.tasks.refresh_connection_task` under.
REFRESH_CONNECTION_TASK: Final = "ladder.tasks.refresh_connection_task"
DELIVER_NOTIFICATION_TASK: Final = "ladder.tasks.deliver_notification_task"
RUN_SIMULATION_TASK: Final = "ladder.tasks.run_simulation_task"
RUN_LEDGER_REPLAY_TASK: Final = "ladder.tasks.run_ledger_replay_task"


def broker_problem() -> str | None:
    """None when the broker takes a connection within about a second, else the error's
    name (never its text: a broker URL may carry a password)."""
    try:
        with app.connection_for_write() as broker:
            broker.ensure_connection(max_retries=1, interval_start=0, timeout=1)
    except Exception as error:
        return type(error).__name__
    return None


def send_refresh(**options: Any) -> None:
    """Publish one refresh of a connection (options as `apply_async`'s: kwargs, eta,
    expires); raises what the broker raises when nothing was queued."""
    app.send_task(REFRESH_CONNECTION_TASK, **options)


def send_delivery(delivery_id: str) -> None:
    """Publish the next attempt of one notification delivery; raises what the broker
    raises when nothing was queued."""
    app.send_task(DELIVER_NOTIFICATION_TASK, kwargs={"delivery_id": delivery_id})


def send_simulation(run_id: int) -> None:
    """Publish one what-if simulation run; raises what the broker raises when nothing
    was queued."""
    app.send_task(RUN_SIMULATION_TASK, kwargs={"run_id": run_id})


def send_ledger_replay(run_id: int) -> None:
    """Publish one ledger replay; raises what the broker raises when nothing was queued."""
    app.send_task(RUN_LEDGER_REPLAY_TASK, kwargs={"run_id": run_id})


def schedule_refresh_at(connection_id: str, reset_at: datetime) -> None:
    """Schedule a refresh just after an upstream reset instant, so routing returns to the
    plan within seconds of the reset rather than at the next periodic poll."""
    eta = reset_at + timedelta(seconds=settings.QUOTA_RESET_GRACE_SECONDS)
    send_refresh(
        kwargs={"connection_id": connection_id, "requested_at": reset_at.isoformat()}, eta=eta
    )


def schedule_refresh_at_reset(connection: Connection, reset_at: datetime | None) -> None:
    """Ask for a refresh right after the upstream's own reset instant (when polled)."""
    if reset_at is None or not core.is_polled(connection.quota_source):
        return
    try:
        schedule_refresh_at(connection.connection_id, reset_at)
    except Exception as error:  # the periodic beat still refreshes once the reset passes
        logger.warning(
            "could not schedule the reset refresh of %s: %s",
            connection.connection_id,
            type(error).__name__,
        )
