"""The beat's heartbeat: proof that the scheduler is still sending due scans.

The beat sends `record_beat_heartbeat_task` every beat period (QUOTA_BEAT_SECONDS), with
the same period and expiry as the due scan; a worker runs it and stamps the single
`BeatHeartbeat` row. A worker alone never runs it, so a fresh stamp proves the beat
schedules. A stamp older than BEAT_HEARTBEAT_MAX_AGE_SECONDS (3 beat periods by
default) means no due scan is being run: the beat is down, or no worker takes its tasks
within a period (the due scans expire then too). `/readyz` answers 503 naming `beat`,
the overview shows a banner and `/metrics` reports its time and age.

Before the first heartbeat (a fresh database): the beat counts as starting while this
process is younger than the limit, since a beat started alongside it sends its first
heartbeat within one period; after that, "no heartbeat yet" is a problem like a late one.

The heartbeat is a task a worker runs, so its silence alone does not prove the beat dead:
the beat process also stamps `sent_at` each time it has published the heartbeat (a
Celery signal, no worker involved). A late heartbeat the beat sent within the limit names
the worker (no worker takes the queue's tasks); one the beat did not send either names the
beat, unless the broker does not answer (then the broker explains both).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from ladder.models import BeatHeartbeat

# When this process started (read by tests, which replace it to pin the grace period).
STARTED_AT = timezone.now()
HEARTBEAT_ID = 1


@dataclass(frozen=True, slots=True)
class BeatHealth:
    """What the heartbeat says about the beat at one instant."""

    last_run_at: datetime | None
    age_seconds: float | None  # None: no heartbeat yet
    max_age_seconds: float
    problem: str | None  # None: the beat is fine (or still starting)

    @property
    def is_late(self) -> bool:
        """Whether the beat should be reported as down."""
        return self.problem is not None


def beat_health(
    last_run_at: datetime | None, *, now: datetime, started_at: datetime, max_age_seconds: float
) -> BeatHealth:
    """Judge a heartbeat (pure): late once older than max_age_seconds; none yet is late
    only once this process has lived longer than that."""
    if last_run_at is None:
        waited = (now - started_at).total_seconds()
        problem = (
            f"no heartbeat yet, {waited:.0f} s after start (limit {max_age_seconds:g} s)"
            if waited > max_age_seconds
            else None
        )
        return BeatHealth(None, None, max_age_seconds, problem)
    # A worker's clock a little ahead of this one's is not a beat from the future.
    age = max((now - last_run_at).total_seconds(), 0.0)
    problem = (
        f"last heartbeat {age:.0f} s ago (limit {max_age_seconds:g} s)"
        if age > max_age_seconds
        else None
    )
    return BeatHealth(last_run_at, age, max_age_seconds, problem)


def silent_part(
    health: BeatHealth, sent_at: datetime | None, *, now: datetime, broker_down: bool
) -> dict[str, str]:
    """Which process a late heartbeat names (pure): {"worker": why} when the beat sent it
    within the limit and no worker ran it, {"beat": why} when the beat did not send it
    either; {} while the heartbeat is fresh or when the broker is down (it explains both)."""
    if health.problem is None or broker_down:
        return {}
    if sent_at is not None:
        sent_age = max((now - sent_at).total_seconds(), 0.0)
        if sent_age <= health.max_age_seconds:
            return {"worker": f"{health.problem}, though the beat sent one {sent_age:.0f} s ago"}
    return {"beat": health.problem}


def heartbeat_times() -> tuple[datetime | None, datetime | None]:
    """When a worker last ran the heartbeat and when the beat last sent it (one query)."""
    row = BeatHeartbeat.objects.filter(pk=HEARTBEAT_ID).values_list("last_run_at", "sent_at")
    return row.first() or (None, None)


def last_heartbeat() -> datetime | None:
    """When the heartbeat task last ran, or None before the first time."""
    return heartbeat_times()[0]


def judge(last_run_at: datetime | None, now: datetime) -> BeatHealth:
    """Judge a heartbeat time against BEAT_HEARTBEAT_MAX_AGE_SECONDS."""
    return beat_health(
        last_run_at,
        now=now,
        started_at=STARTED_AT,
        max_age_seconds=float(settings.BEAT_HEARTBEAT_MAX_AGE_SECONDS),
    )


def current_health(now: datetime) -> BeatHealth:
    """Read the heartbeat and judge it against BEAT_HEARTBEAT_MAX_AGE_SECONDS."""
    return judge(last_heartbeat(), now)


def _stamp(field: str, now: datetime) -> None:
    """Set one of the row's times to now; it never moves back (a late duplicate is harmless)."""
    _row, created = BeatHeartbeat.objects.get_or_create(pk=HEARTBEAT_ID, defaults={field: now})
    if not created:
        earlier = Q(**{f"{field}__lt": now}) | Q(**{f"{field}__isnull": True})
        BeatHeartbeat.objects.filter(earlier, pk=HEARTBEAT_ID).update(**{field: now})


def record_heartbeat(now: datetime) -> None:
    """A worker ran the heartbeat task at `now`."""
    _stamp("last_run_at", now)


def record_sent(now: datetime) -> None:
    """The beat published the heartbeat task at `now` (stamped by the beat process)."""
    _stamp("sent_at", now)
