"""A dead beat or worker is noticed and told apart: the beat's heartbeat (a task it sends
every beat period, stamped as sent by the beat and as run by a worker) is reported by
/readyz, the overview's outage banner and /metrics, at an injected `now`."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from celery.signals import after_task_publish
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
from tests.worlds import seed_demo_world, signed_in

LIMIT = 30.0  # the default: 3 beat periods of 10 s


@pytest.fixture(autouse=True)
def _pinned(monkeypatch: pytest.MonkeyPatch, settings: pytest.FixtureRequest) -> None:
    """NOW everywhere; this process started an hour before NOW (past any grace)."""
    settings.QUOTA_BEAT_SECONDS = 10.0  # type: ignore[attr-defined]
    settings.BEAT_HEARTBEAT_MAX_AGE_SECONDS = LIMIT  # type: ignore[attr-defined]
    monkeypatch.setattr(ops, "current_time", lambda: NOW)
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)
    monkeypatch.setattr(beat, "STARTED_AT", NOW - timedelta(hours=1))
    monkeypatch.setattr(celery_app, "connection_for_write", FakeBroker().connection_for_write)


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


@pytest.mark.django_db
def test_the_beat_stamps_the_heartbeat_sent_once_published_and_nothing_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tasks.timezone, "now", lambda: NOW)

    after_task_publish.send(sender="ladder.tasks.enqueue_due_refreshes_task", body=None)
    other = beat.heartbeat_times()
    after_task_publish.send(sender="ladder.tasks.record_beat_heartbeat_task", body=None)

    assert other == (None, None)
    assert beat.heartbeat_times() == (None, NOW)  # sent, not yet run by any worker


@pytest.mark.django_db
def test_the_sent_and_run_stamps_are_kept_apart_and_never_move_back() -> None:
    beat.record_sent(NOW)
    beat.record_heartbeat(NOW - timedelta(seconds=3))
    beat.record_sent(NOW - timedelta(seconds=50))

    assert beat.heartbeat_times() == (NOW - timedelta(seconds=3), NOW)


LATE = beat.BeatHealth(
    NOW - timedelta(seconds=31), 31.0, LIMIT, "last heartbeat 31 s ago (limit 30 s)"
)
FRESH = beat.BeatHealth(NOW - timedelta(seconds=5), 5.0, LIMIT, None)


@pytest.mark.parametrize(
    ("health", "sent", "broker_down", "silent"),
    [
        pytest.param(FRESH, NOW - timedelta(seconds=5), False, {}, id="fresh"),
        pytest.param(
            LATE,
            NOW - timedelta(seconds=30),
            False,
            {"worker": "last heartbeat 31 s ago (limit 30 s), though the beat sent one 30 s ago"},
            id="sent-within-the-limit",
        ),
        pytest.param(
            LATE,
            NOW - timedelta(seconds=31),
            False,
            {"beat": "last heartbeat 31 s ago (limit 30 s)"},
            id="sent-too-long-ago",
        ),
        pytest.param(
            LATE, None, False, {"beat": "last heartbeat 31 s ago (limit 30 s)"}, id="never-sent"
        ),
        pytest.param(LATE, NOW - timedelta(seconds=31), True, {}, id="broker-down"),
    ],
)
def test_a_late_heartbeat_names_the_worker_when_the_beat_sent_it_else_the_beat(
    health: beat.BeatHealth, sent: object, broker_down: bool, silent: dict[str, str]
) -> None:
    assert (
        beat.silent_part(health, sent, now=NOW, broker_down=broker_down)  # type: ignore[arg-type]
        == silent
    )


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
def test_readyz_names_the_worker_when_the_beat_sent_the_heartbeat_and_none_ran_it() -> None:
    beat.record_heartbeat(NOW - timedelta(seconds=31))
    beat.record_sent(NOW - timedelta(seconds=2))

    response = Client().get("/readyz")

    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "down": {
            "worker": "last heartbeat 31 s ago (limit 30 s), though the beat sent one 2 s ago"
        },
    }


@pytest.mark.django_db
def test_readyz_names_only_the_broker_when_it_refuses_and_the_heartbeat_is_late(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broker = FakeBroker(error=ConnectionRefusedError("connection refused"))
    monkeypatch.setattr(celery_app, "connection_for_write", broker.connection_for_write)
    beat.record_heartbeat(NOW - timedelta(seconds=31))

    response = Client().get("/readyz")

    assert response.json() == {
        "status": "unavailable",
        "down": {"broker": "ConnectionRefusedError"},
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


# --- the overview's outage banner ----------------------------------------------------------


def _outage(client: Client) -> tuple[str, str, str]:
    """The banner's colour class, the parts it names (data-down) and its text."""
    page = parse(signed_in(client, "victor", "viewer").get("/").content)
    (banner,) = page.by_class("banner")
    colour = next(c for c in banner.attrs["class"].split() if c.startswith("banner-"))
    return colour, banner.attrs.get("data-down") or "", banner.text


@pytest.mark.django_db
def test_the_overview_names_the_beat_when_it_neither_sent_nor_saw_its_heartbeat_run(
    client: Client,
) -> None:
    # The world's readings are 40 s old (fresh under 180 s): nothing refused yet.
    seed_demo_world(NOW - timedelta(seconds=40), history=False)
    beat.record_sent(NOW - timedelta(minutes=4, seconds=5))

    colour, down, text = _outage(client)

    assert (colour, down) == ("banner-warn", "beat")
    assert text.startswith(
        "Down: the beat. The scheduler (beat) last sent its heartbeat 4 min 5 s ago. "
        "No due scan is sent while it is down: is the celery beat process running?"
    )
    assert text.endswith(
        "auto/subscription still serves from the last readings; it refuses each plan "
        "connection once its reading is older than 180 s."
    )


@pytest.mark.django_db
def test_the_overview_names_the_worker_when_the_beat_sent_a_heartbeat_none_ran(
    client: Client,
) -> None:
    seed_demo_world(NOW - timedelta(seconds=40), history=False)
    beat.record_sent(NOW - timedelta(seconds=4))

    colour, down, text = _outage(client)

    assert (colour, down) == ("banner-warn", "worker")
    assert text.startswith(
        "Down: the worker. No worker has run a task for 40 s: the beat sent its heartbeat "
        "4 s ago and none ran it. Is a celery worker process running and taking the "
        "queue's tasks?"
    )


@pytest.mark.django_db
def test_the_overview_is_red_naming_the_refused_plans_once_readings_went_stale(
    client: Client,
) -> None:
    # The worker stopped 10 min ago: every polled plan reading is past the 180 s maximum.
    seed_demo_world(NOW - timedelta(minutes=10), history=False)
    beat.record_sent(NOW - timedelta(seconds=4))

    colour, down, text = _outage(client)

    assert (colour, down) == ("banner-error", "worker")
    assert text.endswith(
        "auto/subscription refuses 3 plan connections meanwhile (claude-max-1, claude-max-2, "
        "codex-plus): their quota cannot be verified without fresh readings, so it fails "
        "closed."
    )


@pytest.mark.django_db
def test_the_overview_names_the_broker_when_it_refuses_and_not_the_silent_beat(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = FakeBroker(error=ConnectionRefusedError("connection refused"))
    monkeypatch.setattr(celery_app, "connection_for_write", broker.connection_for_write)
    seed_demo_world(NOW - timedelta(minutes=10), history=False)

    colour, down, text = _outage(client)

    assert (colour, down) == ("banner-error", "broker")
    assert text.startswith(
        "Down: the broker. The broker does not answer (ConnectionRefusedError). The beat "
        "cannot send due scans and no worker can take them: is the broker "
        "(CELERY_BROKER_URL) running?"
    )


@pytest.mark.django_db
def test_the_overview_names_the_beat_that_never_ran(client: Client) -> None:
    colour, down, text = _outage(client)

    assert (colour, down) == ("banner-warn", "beat")
    assert text.startswith(
        "Down: the beat. The scheduler (beat) has not sent its heartbeat since the start."
    )


@pytest.mark.django_db
def test_the_overview_has_no_outage_banner_while_the_heartbeat_is_fresh(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = FakeBroker(error=ConnectionRefusedError("connection refused"))
    monkeypatch.setattr(celery_app, "connection_for_write", broker.connection_for_write)
    seed_demo_world(NOW - timedelta(seconds=5), history=False)

    page = parse(signed_in(client, "victor", "viewer").get("/").content)

    assert page.by_class("banner") == []
    assert broker.ensured == 0  # a fresh heartbeat: the broker is not asked


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
