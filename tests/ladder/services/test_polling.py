"""The refresh shell against a local fake usage endpoint over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from ladder import services
from ladder.core import SUBSCRIPTION_AUTO_ID
from ladder.models import Connection, QuotaReading
from ladder.services import polling, readings
from tests.ladder.factories import make_candidate, make_connection
from tests.ladder.quota.fake_upstream import FakeUpstream

pytestmark = pytest.mark.django_db

USAGE = {"five_hour": {"utilization": 25.0, "resets_at": "2030-01-01T05:00:00+00:00"}}


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    server = FakeUpstream()
    server.start()
    with override_settings(QUOTA_URL_OVERRIDES={"claude": server.url("/api/oauth/usage")}):
        yield server
    server.stop()


def _plan(connection_id: str = "plan") -> Connection:
    return make_connection(connection_id, quota_source="claude", credential="sk-ant-oat01-abc")


def _current(connection_id: str = "plan") -> Any:
    return (
        Connection.objects.select_related("current_reading")
        .get(connection_id=connection_id)
        .current_reading
    )


def test_refresh_stores_the_parsed_reading_and_sends_the_credential(upstream: FakeUpstream) -> None:
    _plan()
    upstream.respond_json(USAGE)

    outcome = polling.refresh_quota("plan")

    reading = _current()
    assert outcome.polled is True
    assert (reading.status, reading.remaining_percent, reading.source) == ("SAFE", 75.0, "claude")
    assert [r.headers["authorization"] for r in upstream.received] == ["Bearer sk-ant-oat01-abc"]
    assert Connection.objects.get(connection_id="plan").refresh_lease_until is None


def test_a_rejected_credential_flags_the_connection_and_reads_unknown(
    upstream: FakeUpstream,
) -> None:
    _plan()
    upstream.respond_json({"error": "expired"}, status=401)

    polling.refresh_quota("plan")

    connection = Connection.objects.select_related("current_reading").get(connection_id="plan")
    assert connection.quota_error == "The usage endpoint rejected the credential."
    assert connection.current_reading.status == "UNKNOWN"
    assert connection.current_reading.detail.startswith("credential_rejected")


def test_a_429_backs_off_polling_for_its_retry_after(upstream: FakeUpstream) -> None:
    _plan()
    upstream.respond(status=429, body="{}", headers={"Retry-After": "120"})
    before = timezone.now()

    polling.refresh_quota("plan", now=before)
    second = polling.refresh_quota("plan", now=before + timedelta(seconds=60))

    connection = Connection.objects.get(connection_id="plan")
    assert connection.poll_not_before == before + timedelta(seconds=120)
    assert (second.polled, second.why) == (False, "the usage endpoint asked us to back off")
    assert len(upstream.received) == 1


def test_a_held_lease_means_no_second_upstream_call(upstream: FakeUpstream) -> None:
    _plan()
    upstream.respond_json(USAGE)
    now = timezone.now()
    Connection.objects.filter(connection_id="plan").update(
        refresh_lease_until=now + timedelta(seconds=30)
    )

    outcome = polling.refresh_quota("plan", now=now)

    assert (outcome.polled, outcome.why) == (False, polling.Lease.HELD_ELSEWHERE.value)
    assert upstream.received == []


@override_settings(QUOTA_MAX_CONCURRENT_POLLS=1)
def test_the_cap_on_concurrent_polls_defers_the_refresh(upstream: FakeUpstream) -> None:
    _plan()
    _plan("other")
    now = timezone.now()
    Connection.objects.filter(connection_id="other").update(
        refresh_lease_until=now + timedelta(seconds=30)
    )

    outcome = polling.refresh_quota("plan", now=now)

    assert (outcome.polled, outcome.is_at_capacity) == (False, True)
    assert upstream.received == []


def test_a_newer_reading_answers_the_request_without_polling(upstream: FakeUpstream) -> None:
    _plan()
    now = timezone.now()
    services.store_reading("plan", services.ReadingInput(remaining_percent=50.0), now=now)

    outcome = polling.refresh_quota("plan", requested_at=now - timedelta(seconds=1))

    assert (outcome.polled, outcome.why) == (False, "a newer reading already exists")
    assert upstream.received == []


def test_due_connections_are_unread_old_or_past_their_reset() -> None:
    now = timezone.now()
    for connection_id in ("never", "fresh", "old", "reset", "idle"):
        _plan(connection_id)
    make_connection("pushed-only")  # no quota source: never polled
    services.store_reading("fresh", services.ReadingInput(remaining_percent=50.0), now=now)
    services.store_reading(
        "old",
        services.ReadingInput(remaining_percent=50.0, checked_at=now - timedelta(seconds=200)),
        now=now,
    )
    services.store_reading(
        "reset",
        services.ReadingInput(
            remaining_percent=0.0,
            reset_at=now - timedelta(seconds=1),
            checked_at=now - timedelta(seconds=20),
        ),
        now=now,
    )
    Connection.objects.filter(connection_id="idle").update(is_active=False)

    due = polling.due_connection_ids(
        now, interval=timedelta(seconds=180), max_state_age=timedelta(seconds=180)
    )

    assert sorted(due) == ["never", "old", "reset"]


def test_a_connection_with_an_empty_quota_source_is_never_due() -> None:
    now = timezone.now()
    _plan("polled")
    make_connection("blank-source")
    # An empty quota_source (a row written by hand or by an older release) names no
    # adapter: like "none", it means readings are pushed, never polled.
    Connection.objects.filter(connection_id="blank-source").update(quota_source="")

    due = polling.due_connection_ids(
        now, interval=timedelta(seconds=180), max_state_age=timedelta(seconds=180)
    )

    assert due == ["polled"]


def test_a_refresh_of_a_connection_with_an_empty_quota_source_polls_nothing(
    upstream: FakeUpstream,
) -> None:
    make_connection("blank-source")
    Connection.objects.filter(connection_id="blank-source").update(quota_source="")
    services.store_reading("blank-source", services.ReadingInput(remaining_percent=60.0))

    outcome = polling.refresh_quota("blank-source")

    assert (outcome.polled, outcome.why) == (False, "the connection has no quota source")
    assert upstream.received == []
    assert QuotaReading.objects.filter(connection__connection_id="blank-source").count() == 1


# --- a reading never describes the future (issue 12, item 1) ------------------------------

EXHAUSTED_USAGE = {"five_hour": {"utilization": 100.0, "resets_at": "2030-01-01T05:00:00+00:00"}}


def _dated_ahead(connection_id: str, at: datetime) -> QuotaReading:
    """A current reading as the code before the cap stored it: dated ahead of its receipt."""
    connection = Connection.objects.get(connection_id=connection_id)
    row = QuotaReading.objects.create(
        connection=connection, status="SAFE", remaining_percent=80.0, checked_at=at
    )
    Connection.objects.filter(pk=connection.pk).update(current_reading=row)
    return row


def test_after_a_future_dated_push_the_worker_polls_and_subscription_excludes_at_once(
    upstream: FakeUpstream,
) -> None:
    _plan()
    make_candidate(connection_id="plan")
    upstream.respond_json(EXHAUSTED_USAGE)
    now = timezone.now()
    services.store_reading(
        "plan",
        services.ReadingInput(remaining_percent=80.0, checked_at=now + timedelta(seconds=30)),
        now=now,
    )

    outcome = polling.refresh_quota(
        "plan", requested_at=now + timedelta(seconds=1), now=now + timedelta(seconds=2)
    )

    decision = services.decide_registered(SUBSCRIPTION_AUTO_ID, now=now + timedelta(seconds=3))
    assert (outcome.polled, len(upstream.received)) == (True, 1)
    assert (_current().status, _current().source) == ("EXHAUSTED", "claude")
    assert decision.candidates == ()


def test_a_reading_stored_in_the_future_does_not_make_the_worker_skip_its_poll(
    upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    _plan()
    upstream.respond_json(EXHAUSTED_USAGE)
    now = timezone.now()
    monkeypatch.setattr(readings, "server_clock", lambda: now)
    _dated_ahead("plan", now + timedelta(seconds=40))

    outcome = polling.refresh_quota("plan", requested_at=now, now=now)

    assert (outcome.polled, len(upstream.received)) == (True, 1)
    assert (_current().status, _current().checked_at) == ("EXHAUSTED", now)


def test_a_connection_whose_reading_is_dated_ahead_of_the_clock_is_due_at_once() -> None:
    now = timezone.now()
    _plan()
    _dated_ahead("plan", now + timedelta(seconds=40))

    due = polling.due_connection_ids(
        now, interval=timedelta(seconds=180), max_state_age=timedelta(seconds=180)
    )

    assert due == ["plan"]


def test_the_shell_enqueues_the_refresh_task_by_its_registered_name() -> None:
    # The shell names the task instead of importing ladder.tasks (tasks call the shell):
    # a renamed task must fail here, not leave every refresh request unconsumed.
    from ladder import tasks
    from ladder.services import enqueue

    assert tasks.refresh_connection_task.name == enqueue.REFRESH_CONNECTION_TASK
    assert enqueue.REFRESH_CONNECTION_TASK in tasks.refresh_connection_task.app.tasks
