"""A dead beat is noticed: the beat's heartbeat (a task it sends every beat period) is
reported by /readyz, the overview banner and /metrics, at an injected `now`."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client

from ladder import beat, tasks
from ladder.metrics import DatabaseCollector
from omniroute_admin import dashboard, ops
from omniroute_admin.celery import app as celery_app
from tests.ladder.factories import NOW
from tests.pages import parse
from tests.processes import DJANGO_SETUP, run_python
from tests.test_ops import FakeBroker
from tests.worlds import signed_in

LIMIT = 30.0  # the default: 3 beat periods of 10 s


@pytest.fixture(autouse=True)
def _pinned(monkeypatch: pytest.MonkeyPatch, settings: pytest.FixtureRequest) -> None:
    """NOW everywhere; this process started an hour before NOW (past any grace)."""
    settings.QUOTA_BEAT_SECONDS = 10.0  # type: ignore[attr-defined]
    settings.BEAT_HEARTBEAT_MAX_AGE_SECONDS = LIMIT  # type: ignore[attr-defined]
    monkeypatch.setattr(ops, "current_time", lambda: NOW)
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)
    monkeypatch.setattr(beat, "STARTED_AT", NOW - timedelta(hours=1))
    monkeypatch.setattr(ops.celery_app, "connection_for_write", FakeBroker().connection_for_write)


# --- the heartbeat ----------------------------------------------------------------------


def test_the_beat_sends_the_heartbeat_every_beat_period_like_the_due_scan() -> None:
    schedule = settings.CELERY_BEAT_SCHEDULE

    assert schedule["beat-heartbeat"] == {
        "task": "ladder.tasks.record_beat_heartbeat_task",
        "schedule": settings.QUOTA_BEAT_SECONDS,
        "options": {"expires": settings.QUOTA_BEAT_SECONDS},
    }
    assert schedule["beat-heartbeat"]["schedule"] == schedule["enqueue-due-refreshes"]["schedule"]
    assert "ladder.tasks.record_beat_heartbeat_task" in celery_app.tasks


@pytest.mark.django_db
def test_the_heartbeat_task_stamps_its_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tasks.timezone, "now", lambda: NOW)

    tasks.record_beat_heartbeat_task()

    assert beat.last_heartbeat() == NOW


@pytest.mark.django_db
def test_a_late_duplicate_heartbeat_never_moves_it_back() -> None:
    beat.record_heartbeat(NOW)
    beat.record_heartbeat(NOW - timedelta(seconds=50))

    assert beat.last_heartbeat() == NOW
    beat.record_heartbeat(NOW + timedelta(seconds=10))
    assert beat.last_heartbeat() == NOW + timedelta(seconds=10)


@pytest.mark.parametrize(
    ("last_run", "started", "age", "problem"),
    [
        pytest.param(
            NOW - timedelta(seconds=30), NOW - timedelta(hours=1), 30.0, None, id="at-limit"
        ),
        pytest.param(
            NOW - timedelta(seconds=31),
            NOW - timedelta(hours=1),
            31.0,
            "last heartbeat 31 s ago (limit 30 s)",
            id="late",
        ),
        pytest.param(NOW + timedelta(seconds=2), NOW, 0.0, None, id="worker-clock-ahead"),
        pytest.param(None, NOW - timedelta(seconds=30), None, None, id="none-yet-starting"),
        pytest.param(
            None,
            NOW - timedelta(seconds=31),
            None,
            "no heartbeat yet, 31 s after start (limit 30 s)",
            id="none-yet-too-long",
        ),
    ],
)
def test_beat_health_is_late_past_the_limit_and_none_yet_past_the_start_grace(
    last_run: object, started: object, age: float | None, problem: str | None
) -> None:
    health = beat.beat_health(
        last_run,  # type: ignore[arg-type]
        now=NOW,
        started_at=started,  # type: ignore[arg-type]
        max_age_seconds=LIMIT,
    )

    assert (health.age_seconds, health.problem, health.is_late) == (age, problem, bool(problem))


# --- /readyz ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_readyz_is_503_naming_the_beat_once_its_heartbeat_is_older_than_the_limit() -> None:
    beat.record_heartbeat(NOW - timedelta(seconds=31))

    response = Client().get("/readyz")

    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "down": {"beat": "last heartbeat 31 s ago (limit 30 s)"},
    }


@pytest.mark.django_db
def test_readyz_is_200_while_the_heartbeat_is_within_the_limit() -> None:
    beat.record_heartbeat(NOW - timedelta(seconds=30))

    response = Client().get("/readyz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_waits_one_limit_after_start_for_the_first_heartbeat(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(beat, "STARTED_AT", NOW - timedelta(seconds=29))
    starting = Client().get("/readyz")
    monkeypatch.setattr(beat, "STARTED_AT", NOW - timedelta(seconds=31))
    never_ran = Client().get("/readyz")

    assert starting.status_code == 200
    assert never_ran.status_code == 503
    assert never_ran.json()["down"] == {"beat": "no heartbeat yet, 31 s after start (limit 30 s)"}


# --- the overview banner ------------------------------------------------------------------


@pytest.mark.django_db
def test_the_overview_warns_that_the_beat_last_ran_minutes_ago(client: Client) -> None:
    beat.record_heartbeat(NOW - timedelta(minutes=4, seconds=5))

    page = parse(signed_in(client, "victor", "viewer").get("/").content)

    (banner,) = page.by_class("banner")
    assert banner.text.startswith(
        "The scheduler (beat) last ran 4 min 5 s ago: readings will go stale."
    )
    assert "is the celery beat process running" in banner.text


@pytest.mark.django_db
def test_the_overview_warns_that_the_beat_never_ran(client: Client) -> None:
    page = parse(signed_in(client, "victor", "viewer").get("/").content)

    (banner,) = page.by_class("banner")
    assert banner.text.startswith("The scheduler (beat) has not run yet: readings will go stale.")


@pytest.mark.django_db
def test_the_overview_has_no_beat_banner_while_the_heartbeat_is_fresh(client: Client) -> None:
    beat.record_heartbeat(NOW - timedelta(seconds=5))

    page = parse(signed_in(client, "victor", "viewer").get("/").content)

    assert page.by_class("banner") == []


# --- /metrics -----------------------------------------------------------------------------


def _gauges(collector: DatabaseCollector) -> dict[str, list[float]]:
    return {
        family.name: [sample.value for sample in family.samples]
        for family in collector.collect()
        if family.name.startswith("omniroute_beat_")
    }


@pytest.mark.django_db
def test_metrics_report_the_beats_last_run_and_heartbeat_age() -> None:
    beat.record_heartbeat(NOW - timedelta(seconds=42))

    assert _gauges(DatabaseCollector(now=NOW)) == {
        "omniroute_beat_last_run_timestamp_seconds": [(NOW - timedelta(seconds=42)).timestamp()],
        "omniroute_beat_heartbeat_age_seconds": [42.0],
        "omniroute_beat_heartbeat_max_age_seconds": [LIMIT],
    }


@pytest.mark.django_db
def test_metrics_leave_the_beat_gauges_absent_before_the_first_heartbeat() -> None:
    assert _gauges(DatabaseCollector(now=NOW)) == {
        "omniroute_beat_last_run_timestamp_seconds": [],
        "omniroute_beat_heartbeat_age_seconds": [],
        "omniroute_beat_heartbeat_max_age_seconds": [LIMIT],
    }


@pytest.mark.django_db
def test_the_metrics_endpoint_exposes_the_beat_gauges() -> None:
    beat.record_heartbeat(NOW)

    body = Client().get("/metrics").content.decode()

    assert "\nomniroute_beat_last_run_timestamp_seconds " in body
    assert "\nomniroute_beat_heartbeat_age_seconds " in body
    assert "\nomniroute_beat_heartbeat_max_age_seconds 30.0\n" in body


# --- the setting --------------------------------------------------------------------------


def test_a_heartbeat_limit_within_one_beat_period_stops_start_up() -> None:
    env = {**os.environ, "QUOTA_BEAT_SECONDS": "10", "BEAT_HEARTBEAT_MAX_AGE_SECONDS": "10"}

    result = run_python(["-c", DJANGO_SETUP], env)

    assert result.returncode != 0
    assert "BEAT_HEARTBEAT_MAX_AGE_SECONDS must be longer than QUOTA_BEAT_SECONDS" in result.stderr
