"""`POST /api/v1/connections/{id}/readings` (ladder/api/events.py): a reading stored,
its status derived, its windows reduced, its times checked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from ladder.models import (
    Connection,
    QuotaReading,
)
from tests.ladder.api.calls import post_event, post_reading, reading_rows
from tests.ladder.factories import api, iso, make_candidate, make_connection

pytestmark = pytest.mark.django_db


def between(text: str | None, low: datetime, high: datetime) -> bool:
    """A returned instant lies in [low, high] (the encoder truncates to milliseconds)."""
    assert text is not None
    moment = datetime.fromisoformat(text)
    return low.replace(microsecond=low.microsecond // 1000 * 1000) <= moment <= high


def test_post_reading_stores_it_and_answers_201(gateway: str) -> None:
    make_connection("claude-max-1")
    checked_at = timezone.now().replace(microsecond=0) - timedelta(seconds=5)
    reset_at = checked_at + timedelta(hours=3)

    response = post_reading(
        gateway,
        {
            "remaining_percent": 41.5,
            "reset_at": reset_at.isoformat(),
            "checked_at": checked_at.isoformat(),
        },
    )

    assert response.status_code == 201
    assert response.json() == {
        "status": "SAFE",
        "remaining_percent": 41.5,
        "reset_at": iso(reset_at),
        "checked_at": iso(checked_at),
        "windows": [],
        "source": "push",
        "detail": "",
    }
    assert reading_rows() == [("SAFE", 41.5, reset_at, checked_at, "push")]
    assert Connection.objects.get().current_reading_id == QuotaReading.objects.get().pk


@pytest.mark.parametrize(
    ("body", "status"),
    [
        pytest.param({"remaining_percent": 0}, "EXHAUSTED", id="zero-is-exhausted"),
        pytest.param({"remaining_percent": 0.5}, "SAFE", id="positive-is-safe"),
        pytest.param({}, "UNKNOWN", id="no-number-is-unknown"),
        pytest.param(
            {"status": "EXHAUSTED", "remaining_percent": 30}, "EXHAUSTED", id="given-kept"
        ),
        pytest.param({"status": "UNKNOWN", "remaining_percent": 30}, "UNKNOWN", id="given-unknown"),
    ],
)
def test_post_reading_derives_the_status_only_when_absent(
    gateway: str, body: dict[str, Any], status: str
) -> None:
    make_connection("claude-max-1")

    response = post_reading(gateway, body)

    assert response.status_code == 201
    assert response.json()["status"] == status
    assert QuotaReading.objects.get().status == status


def test_post_reading_defaults_checked_at_to_now(gateway: str) -> None:
    make_connection("claude-max-1")
    before = timezone.now()

    response = post_reading(gateway, {"remaining_percent": 50})

    assert between(response.json()["checked_at"], before, timezone.now())


def test_post_reading_returns_times_in_utc(gateway: str) -> None:
    make_connection("claude-max-1")

    response = post_reading(
        gateway, {"remaining_percent": 50, "checked_at": "2026-01-01T08:00:00+05:30"}
    )

    assert response.json()["checked_at"] == "2026-01-01T02:30:00Z"
    assert QuotaReading.objects.get().checked_at == datetime(2026, 1, 1, 2, 30, tzinfo=UTC)


def test_post_reading_with_an_offset_beyond_the_databases_range_is_stored_in_utc(
    gateway: str,
) -> None:
    # Python allows offsets up to 23:59, PostgreSQL 15:59: this used to answer 500 there.
    make_connection("claude-max-1")

    response = post_reading(
        gateway, {"remaining_percent": 50, "checked_at": "2026-01-01T00:00:00-21:52"}
    )

    assert response.status_code == 201
    assert response.json()["checked_at"] == "2026-01-01T21:52:00Z"


def test_post_reading_with_an_instant_outside_the_calendar_in_utc_is_422(gateway: str) -> None:
    make_connection("claude-max-1")

    response = post_reading(
        gateway, {"remaining_percent": 50, "checked_at": "0001-01-01T00:00:00+05:00"}
    )

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", "checked_at"], "value_error")
    ]
    assert reading_rows() == []


def test_post_reading_more_than_60_s_in_the_future_is_422_and_stores_nothing(
    gateway: str,
) -> None:
    make_connection("claude-max-1")
    future = timezone.now() + timedelta(seconds=120)

    response = post_reading(gateway, {"remaining_percent": 50, "checked_at": future.isoformat()})

    assert response.status_code == 422
    assert response.json() == {
        "detail": [
            {
                "loc": ["body", "payload", "checked_at"],
                "msg": "More than 60 s in the future.",
                "type": "value_error",
            }
        ]
    }
    assert reading_rows() == []


def test_post_reading_slightly_in_the_future_is_accepted(gateway: str) -> None:
    make_connection("claude-max-1")
    future = timezone.now() + timedelta(seconds=30)

    response = post_reading(gateway, {"remaining_percent": 50, "checked_at": future.isoformat()})

    assert response.status_code == 201


def test_post_reading_slightly_in_the_future_is_stored_as_the_receive_time(gateway: str) -> None:
    make_connection("claude-max-1")
    before = timezone.now()

    response = post_reading(
        gateway,
        {"remaining_percent": 50, "checked_at": (before + timedelta(seconds=30)).isoformat()},
    )

    after = timezone.now()
    assert response.status_code == 201
    assert between(response.json()["checked_at"], before, after)
    assert before <= QuotaReading.objects.get().checked_at <= after


@pytest.mark.parametrize(
    "later_truth",
    [
        pytest.param({"kind": "quota_exhausted"}, id="quota-exhausted-event"),
        pytest.param({"remaining_percent": 0}, id="server-stamped-push"),
        pytest.param(
            {"kind": "success", "headers": {"anthropic-ratelimit-unified-status": "rejected"}},
            id="rate-limit-headers",
        ),
    ],
)
def test_after_a_future_dated_push_the_later_truth_is_current_and_the_pool_excludes_at_once(
    gateway: str, later_truth: dict[str, Any]
) -> None:
    make_connection("claude-max-1")
    make_candidate(connection_id="claude-max-1")
    ahead = timezone.now() + timedelta(seconds=50)
    post_reading(gateway, {"remaining_percent": 80, "checked_at": ahead.isoformat()})
    served_before = api("get", "/api/v1/pools/auto/subscription", gateway).json()["candidates"]

    if "kind" in later_truth:
        response = post_event(gateway, later_truth)
    else:
        response = post_reading(gateway, later_truth)

    status = api("get", "/api/v1/connections/claude-max-1/status", gateway).json()
    pool = api("get", "/api/v1/pools/auto/subscription", gateway).json()
    assert response.status_code in (200, 201)
    assert [c["connection_id"] for c in served_before] == ["claude-max-1"]
    assert (status["reading"]["status"], status["hysteresis"]["state"]) == (
        "EXHAUSTED",
        "dropped_out",
    )
    assert pool["candidates"] == []
    assert [e["connection_id"] for e in pool["excluded"]] == ["claude-max-1"]


def test_post_reading_reduces_windows_to_the_lowest_with_the_later_reset_on_a_tie(
    gateway: str,
) -> None:
    make_connection("claude-max-1")
    soon = datetime(2026, 11, 29, 17, 0, tzinfo=UTC)
    later = datetime(2026, 12, 3, 0, 0, tzinfo=UTC)
    windows = [
        {"name": "five_hour", "remaining_percent": 20, "reset_at": soon.isoformat()},
        {"name": "seven_day", "remaining_percent": 20, "reset_at": later.isoformat()},
        {"name": "opus", "remaining_percent": 70, "reset_at": None},
        {"name": "unknown", "remaining_percent": None},
    ]

    response = post_reading(gateway, {"windows": windows})

    assert response.status_code == 201
    body = response.json()
    assert (body["status"], body["remaining_percent"], body["reset_at"]) == (
        "SAFE",
        20.0,
        "2026-12-03T00:00:00Z",
    )
    assert body["windows"] == [
        {
            "name": "five_hour",
            "remaining_percent": 20,
            "reset_at": "2026-11-29T17:00:00+00:00",
            "model_scope": None,
        },
        {
            "name": "seven_day",
            "remaining_percent": 20,
            "reset_at": "2026-12-03T00:00:00+00:00",
            "model_scope": None,
        },
        {"name": "opus", "remaining_percent": 70, "reset_at": None, "model_scope": None},
        {"name": "unknown", "remaining_percent": None, "reset_at": None, "model_scope": None},
    ]


def test_post_reading_keeps_a_given_remaining_over_the_windows(gateway: str) -> None:
    make_connection("claude-max-1")

    response = post_reading(
        gateway, {"remaining_percent": 55, "windows": [{"name": "w", "remaining_percent": 10}]}
    )

    assert response.json()["remaining_percent"] == 55.0


def test_a_late_older_reading_is_kept_as_history_but_not_made_current(gateway: str) -> None:
    make_connection("claude-max-1")
    now = timezone.now()
    newest = post_reading(
        gateway, {"remaining_percent": 50, "checked_at": (now - timedelta(seconds=10)).isoformat()}
    )
    post_reading(
        gateway, {"remaining_percent": 1, "checked_at": (now - timedelta(seconds=100)).isoformat()}
    )

    status = api("get", "/api/v1/connections/claude-max-1/status", gateway).json()

    assert QuotaReading.objects.count() == 2
    assert status["reading"]["checked_at"] == newest.json()["checked_at"]
    assert status["reading"]["remaining_percent"] == 50.0
    assert status["hysteresis"]["state"] == "in_play"


def test_storing_a_reading_updates_the_hysteresis_state(gateway: str) -> None:
    make_connection("claude-max-1")

    post_reading(gateway, {"remaining_percent": 1.5})

    connection = Connection.objects.get()
    assert (connection.hysteresis_state, connection.hysteresis_reason) == (
        "dropped_out",
        "1.5 % left, at or below the exit cutoff of 2 %",
    )


def test_post_reading_for_an_unknown_connection_is_404(gateway: str) -> None:
    response = post_reading(gateway, {"remaining_percent": 50}, connection_id="nobody")

    assert response.status_code == 404
    assert response.json() == {"detail": "No connection 'nobody'."}
    assert reading_rows() == []


@pytest.mark.parametrize(
    ("body", "loc", "error_type"),
    [
        pytest.param(
            {"remaining_percent": 101}, ["remaining_percent"], "less_than_equal", id="over-100"
        ),
        pytest.param(
            {"remaining_percent": -0.1}, ["remaining_percent"], "greater_than_equal", id="negative"
        ),
        pytest.param(
            {"remaining_percent": True}, ["remaining_percent"], "float_type", id="boolean"
        ),
        pytest.param({"remaining_percent": "50"}, ["remaining_percent"], "float_type", id="string"),
        pytest.param({"status": "FINE"}, ["status"], "literal_error", id="unknown-status"),
        pytest.param(
            {"checked_at": "2026-01-01T00:00:00"}, ["checked_at"], "timezone_aware", id="naive"
        ),
        pytest.param({"checked_at": 0}, ["checked_at"], "value_error", id="unix-time"),
        pytest.param({"source": "me"}, ["source"], "extra_forbidden", id="read-only-source"),
        pytest.param(
            {"windows": [{"name": "w", "left": 3}]},
            ["windows", 0, "left"],
            "extra_forbidden",
            id="window-field",
        ),
    ],
)
def test_post_reading_refuses_an_invalid_body_and_stores_nothing(
    gateway: str, body: dict[str, Any], loc: list[Any], error_type: str
) -> None:
    make_connection("claude-max-1")

    response = post_reading(gateway, body)

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", *loc], error_type)
    ]
    assert reading_rows() == []
