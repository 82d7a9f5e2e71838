"""Polling rules: which connections the worker polls, when a reading is due again, and
when a reading's reset instant earns a refresh of its own. The shell (the beat's due
scan, the reset-time refresh, the refresh button) and the simulator call these."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

# A connection's quota_source when nothing polls it (the stored default).
NO_QUOTA_SOURCE: Final = "none"
# Every quota_source that means "not polled": an empty one too (a row written by hand
# or by an older release), which no adapter is named after.
UNPOLLED_QUOTA_SOURCES: Final = ("", NO_QUOTA_SOURCE)

# A reading is refreshed this long before it goes stale, so subscription never sees a
# stale reading while the worker is healthy; but never more often than this floor.
STALE_MARGIN: Final = timedelta(seconds=30)
MIN_DUE_AGE: Final = timedelta(seconds=5)

# Reset-time refreshes are scheduled only this far ahead: an ETA task held longer than the
# broker's visibility timeout (Redis) or consumer timeout (RabbitMQ) would be redelivered
# or dropped, and the beat refreshes any reading whose reset has passed anyway.
RESET_REFRESH_HORIZON: Final = timedelta(minutes=30)


def is_polled(quota_source: str) -> bool:
    """Whether a connection with this quota source is polled by the worker."""
    return quota_source not in UNPOLLED_QUOTA_SOURCES


def due_age(interval: timedelta, max_state_age: timedelta) -> timedelta:
    """The age at which the beat polls a reading again: the refresh interval, or a
    little before the reading would go stale when that comes first."""
    return min(interval, max(max_state_age - STALE_MARGIN, MIN_DUE_AGE))


def should_schedule_reset_refresh(
    reset_at: datetime | None,
    previous_reset: datetime | None,
    previous_checked_at: datetime | None,
    now: datetime,
) -> bool:
    """Schedule a refresh for a reset instant once: when it is near enough, and the
    previous current reading did not already schedule the same instant."""
    if reset_at is None or not now < reset_at <= now + RESET_REFRESH_HORIZON:
        return False
    # Every poll of a window repeats its reset: one scheduled refresh per instant.
    was_scheduled = (
        previous_reset == reset_at
        and previous_checked_at is not None
        and reset_at <= previous_checked_at + RESET_REFRESH_HORIZON
    )
    return not was_scheduled


def is_reading_due(
    checked_at: datetime | None, reset_at: datetime | None, now: datetime, due_age: timedelta
) -> bool:
    """Whether the beat polls a connection whose current reading has these instants:
    never read, `due_age` old, its reset passed, or dated ahead of the clock."""
    if checked_at is None:
        return True
    # Dated ahead of the clock (stored before checked_at was capped): its age is unknown.
    return (
        checked_at <= now - due_age
        or checked_at > now
        or (reset_at is not None and reset_at <= now)
    )


def answers_refresh(
    checked_at: datetime | None, requested_at: datetime, received: datetime
) -> bool:
    """Whether a current reading checked at `checked_at` already answers a refresh
    requested at `requested_at` (so the poll is skipped); `received` is the receive time."""
    # One dated ahead of the clock proves nothing about now: it never answers.
    return checked_at is not None and requested_at <= checked_at <= received
