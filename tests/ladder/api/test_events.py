"""`POST /api/v1/connections/{id}/events` (ladder/api/events.py): cooldowns from
failures, clamped to the reset; exhaustion; success clears."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from ladder.models import (
    Connection,
    QuotaReading,
)
from tests.ladder.api.calls import post_event
from tests.ladder.factories import iso, make_connection

pytestmark = pytest.mark.django_db


def between(text: str | None, low: datetime, high: datetime) -> bool:
    """A returned instant lies in [low, high] (the encoder truncates to milliseconds)."""
    assert text is not None
    moment = datetime.fromisoformat(text)
    return low.replace(microsecond=low.microsecond // 1000 * 1000) <= moment <= high


def test_a_rate_limit_without_retry_after_cools_down_for_the_base_backoff(gateway: str) -> None:
    make_connection("claude-max-1")
    before = timezone.now()

    response = post_event(gateway, {"kind": "rate_limited"})

    after = timezone.now()
    body = response.json()
    assert response.status_code == 200
    assert {k: v for k, v in body.items() if k != "cooldown_until"} == {
        "connection_id": "claude-max-1",
        "cooldown_seconds": 5.0,
        "clamped_to_reset": False,
        "consecutive_failures": 1,
    }
    assert between(
        body["cooldown_until"], before + timedelta(seconds=5), after + timedelta(seconds=5)
    )
    connection = Connection.objects.get()
    assert iso(connection.cooldown_until) == body["cooldown_until"]
    assert connection.consecutive_failures == 1


def test_consecutive_failures_double_the_backoff(gateway: str) -> None:
    make_connection("claude-max-1")
    post_event(gateway, {"kind": "error"})

    response = post_event(gateway, {"kind": "rate_limited"})

    assert (response.json()["cooldown_seconds"], response.json()["consecutive_failures"]) == (
        10.0,
        2,
    )


def test_a_retry_after_is_used_as_given_past_the_backoff_cap(gateway: str) -> None:
    make_connection("claude-max-1")

    response = post_event(gateway, {"kind": "rate_limited", "retry_after_seconds": 600})

    assert response.json()["cooldown_seconds"] == 600.0


def test_a_retry_after_header_is_used_when_the_field_is_absent(gateway: str) -> None:
    make_connection("claude-max-1")

    response = post_event(gateway, {"kind": "rate_limited", "headers": {"Retry-After": "42"}})

    assert response.json()["cooldown_seconds"] == 42.0


def test_a_cooldown_is_clamped_to_an_earlier_reset(gateway: str) -> None:
    make_connection("claude-max-1")
    reset_at = (timezone.now() + timedelta(seconds=60)).replace(microsecond=0)

    response = post_event(
        gateway,
        {"kind": "rate_limited", "retry_after_seconds": 600, "reset_at": reset_at.isoformat()},
    )

    body = response.json()
    assert (body["cooldown_until"], body["clamped_to_reset"]) == (iso(reset_at), True)
    assert 0 < body["cooldown_seconds"] <= 60
    assert Connection.objects.get().cooldown_until == reset_at


def test_a_quota_exhausted_event_stores_an_exhausted_reading_until_the_reset(
    gateway: str,
) -> None:
    make_connection("claude-max-1")
    reset_at = (timezone.now() + timedelta(hours=2)).replace(microsecond=0)

    response = post_event(gateway, {"kind": "quota_exhausted", "reset_at": reset_at.isoformat()})

    assert response.status_code == 200
    reading = QuotaReading.objects.get()
    assert (reading.status, reading.remaining_percent, reading.reset_at, reading.source) == (
        "EXHAUSTED",
        0.0,
        reset_at,
        "event",
    )
    assert Connection.objects.get().hysteresis_state == "dropped_out"


def test_a_success_clears_the_failures_and_the_cooldown_observed_a_minute_before(
    gateway: str,
) -> None:
    make_connection("claude-max-1")
    observed = (timezone.now() - timedelta(seconds=61)).isoformat()
    post_event(
        gateway, {"kind": "rate_limited", "retry_after_seconds": 600, "observed_at": observed}
    )

    response = post_event(gateway, {"kind": "success"})

    assert response.json() == {
        "connection_id": "claude-max-1",
        "cooldown_until": None,
        "cooldown_seconds": 0.0,
        "clamped_to_reset": False,
        "consecutive_failures": 0,
    }
    connection = Connection.objects.get()
    assert (connection.cooldown_until, connection.consecutive_failures) == (None, 0)


def test_a_success_within_a_minute_of_the_failure_answers_the_cooldown_that_stands(
    gateway: str,
) -> None:
    make_connection("claude-max-1")
    failed = post_event(gateway, {"kind": "rate_limited", "retry_after_seconds": 600}).json()

    response = post_event(gateway, {"kind": "success"})

    answer = response.json()
    assert (answer["cooldown_until"], answer["consecutive_failures"]) == (
        failed["cooldown_until"],
        1,
    )
    assert Connection.objects.get().consecutive_failures == 1


def test_an_event_for_an_unknown_connection_is_404(gateway: str) -> None:
    response = post_event(gateway, {"kind": "error"}, connection_id="nobody")

    assert response.status_code == 404
    assert response.json() == {"detail": "No connection 'nobody'."}


@pytest.mark.parametrize(
    ("body", "loc", "error_type"),
    [
        pytest.param({"kind": "timeout"}, ["kind"], "literal_error", id="unknown-kind"),
        pytest.param({}, ["kind"], "missing", id="no-kind"),
        pytest.param(
            {"kind": "error", "retry_after_seconds": -1},
            ["retry_after_seconds"],
            "greater_than_equal",
            id="negative-retry",
        ),
        pytest.param(
            {"kind": "error", "retry_after_seconds": "30"},
            ["retry_after_seconds"],
            "float_type",
            id="string-retry",
        ),
        pytest.param(
            {"kind": "error", "headers": {"a": 1}},
            ["headers", "a"],
            "string_type",
            id="numeric-header",
        ),
        pytest.param(
            {"kind": "error", "status": 429}, ["status"], "extra_forbidden", id="unknown-field"
        ),
        pytest.param({"kind": "error", "reset_at": 0}, ["reset_at"], "value_error", id="unix-time"),
    ],
)
def test_an_invalid_event_is_422_and_changes_nothing(
    gateway: str, body: dict[str, Any], loc: list[Any], error_type: str
) -> None:
    make_connection("claude-max-1")

    response = post_event(gateway, body)

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", *loc], error_type)
    ]
    connection = Connection.objects.get()
    assert (connection.cooldown_until, connection.consecutive_failures) == (None, 0)
