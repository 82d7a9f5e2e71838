"""The overview's outage banner: what is down (the worker, the beat or the broker) and
whether `auto/subscription` refuses traffic because of it (red) or not yet (amber).

The beat's heartbeat tells them apart (ladder/beat.py): late, but sent by the beat within
the limit, no worker runs tasks; not sent either, the beat is down, unless the broker
does not answer (asked only then, so a healthy overview never waits on it). The database
never shows here: without it the page cannot be drawn, and the page's error box says the
database is not answering (omniroute_admin/deadline.py, static/dashboard.js)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ladder import beat
from ladder.core.decide import Decision
from ladder.core.types import UNVERIFIED_QUOTA_REASONS
from ladder.services.enqueue import broker_problem
from ladder.web.presenters import duration_text


@dataclass(frozen=True, slots=True)
class DownPart:
    """One process or service that is down, what shows it and what to check."""

    name: str  # worker, beat, broker
    what: str
    hint: str


@dataclass(frozen=True, slots=True)
class Outage:
    """What is down, and the plan connections `auto/subscription` refuses meanwhile (those
    whose quota it cannot verify: no reading, a stale one, or one whose window reset)."""

    parts: tuple[DownPart, ...]
    refused: tuple[str, ...]

    @property
    def names(self) -> str:
        """ "the worker", "the beat", "the broker"."""
        return " and ".join(f"the {part.name}" for part in self.parts)


def _ago(now: datetime, then: datetime) -> str:
    return duration_text((now - then).total_seconds())


def _part(name: str, now: datetime, health: beat.BeatHealth, sent_at: datetime | None) -> DownPart:
    last_run_at = health.last_run_at
    if name == "worker":
        assert sent_at is not None  # beat.silent_part names the worker only then
        ran = f"for {_ago(now, last_run_at)}" if last_run_at else "since the start"
        return DownPart(
            "worker",
            f"No worker has run a task {ran}: the beat sent its heartbeat "
            f"{_ago(now, sent_at)} ago and none ran it.",
            "Is a celery worker process running and taking the queue's tasks?",
        )
    sent = sent_at or last_run_at
    return DownPart(
        "beat",
        f"The scheduler (beat) last sent its heartbeat {_ago(now, sent)} ago."
        if sent
        else "The scheduler (beat) has not sent its heartbeat since the start.",
        "No due scan is sent while it is down: is the celery beat process running?",
    )


def outage(now: datetime, subscription: Decision) -> Outage | None:
    """The banner's facts, or None while the heartbeat is fresh (one query then)."""
    last_run_at, sent_at = beat.heartbeat_times()
    health = beat.judge(last_run_at, now)
    if not health.is_late:
        return None
    parts = []
    broker = broker_problem()
    if broker is not None:
        parts.append(
            DownPart(
                "broker",
                f"The broker does not answer ({broker}).",
                "The beat cannot send due scans and no worker can take them: "
                "is the broker (CELERY_BROKER_URL) running?",
            )
        )
    silent = beat.silent_part(health, sent_at, now=now, broker_down=broker is not None)
    parts.extend(_part(name, now, health, sent_at) for name in silent)
    refused = sorted(
        {e.connection_id for e in subscription.excluded if e.reason in UNVERIFIED_QUOTA_REASONS}
    )
    return Outage(tuple(parts), tuple(refused))
