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


# A window has rolled over only when its reset moved by this much or more; less is jitter.
ROLLOVER_MIN: Final = timedelta(seconds=60)


def has_rolled_over(previous_reset: datetime | None, reset_at: datetime | None) -> bool:
    """True when a window's reset moved forward by ROLLOVER_MIN or more (a new window);
    jitter of the same instant never counts as a reset."""
    if previous_reset is None or reset_at is None:
        return False
    return reset_at - previous_reset >= ROLLOVER_MIN


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
    # Every poll of a window repeats its reset: one scheduled refresh per instant. The
    # instant jitters (providers recompute it on every response, by up to about 2 s):
    # a reset within ROLLOVER_MIN of the previous one is the same instant, never a
    # rollover, and never reschedules (spec/ladder.md, "Windows scoped to a model").
    was_scheduled = (
        previous_reset is not None
        and abs(reset_at - previous_reset) < ROLLOVER_MIN
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
