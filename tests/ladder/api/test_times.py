"""Numbers are not times (issue 12, item 8): in every body that carries an instant
(readings, events, spend), and spend dated within the accepted span only."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from billing import services as billing_services
from ladder.models import (
    Connection,
    LadderSettings,
    SpendEntry,
)
from tests.ladder.api.calls import post_reading, reading_rows
from tests.ladder.factories import api, make_connection

pytestmark = pytest.mark.django_db


NOT_TIMES = [
    pytest.param("1796114593000", "value_error", id="digits-as-milliseconds"),
    pytest.param("-1", "value_error", id="minus-one"),
    pytest.param("0", "value_error", id="zero"),
    pytest.param("1764417600.5", "value_error", id="decimal-digits"),
    pytest.param(1764417600, "value_error", id="json-number"),
    pytest.param("2026-11-29", "value_error", id="date-only"),
    pytest.param("2026-11-29T12:00:00", "timezone_aware", id="no-offset"),
]
SPEND_BODY = {
    "request_id": "req-1",
    "connection_id": "openai-key",
    "provider": "openai",
    "model": "gpt-4o-mini",
    "cost_usd": 1.0,
}
# Every time field of every write body: (path, body holding the value, location).
TIME_FIELDS = [
    pytest.param(
        "/api/v1/connections/claude-max-1/readings",
        lambda v: {"remaining_percent": 50, "checked_at": v},
        ["checked_at"],
        id="reading-checked_at",
    ),
    pytest.param(
        "/api/v1/connections/claude-max-1/readings",
        lambda v: {"remaining_percent": 50, "reset_at": v},
        ["reset_at"],
        id="reading-reset_at",
    ),
    pytest.param(
        "/api/v1/connections/claude-max-1/readings",
        lambda v: {"windows": [{"name": "five_hour", "remaining_percent": 5, "reset_at": v}]},
        ["windows", 0, "reset_at"],
        id="window-reset_at",
    ),
    pytest.param(
        "/api/v1/connections/claude-max-1/events",
        lambda v: {"kind": "quota_exhausted", "reset_at": v},
        ["reset_at"],
        id="event-reset_at",
    ),
    pytest.param(
        "/api/v1/spend", lambda v: {**SPEND_BODY, "occurred_at": v}, ["occurred_at"], id="spend"
    ),
]


def written_state() -> tuple[Any, ...]:
    connection = Connection.objects.get()
    return (
        reading_rows(),
        list(SpendEntry.objects.values_list("request_id", flat=True)),
        connection.cooldown_until,
        connection.consecutive_failures,
        connection.hysteresis_state,
        billing_services.change_counters(),
    )


@pytest.mark.parametrize(("path", "body_of", "loc"), TIME_FIELDS)
@pytest.mark.parametrize(("value", "error_type"), NOT_TIMES)
def test_a_number_a_string_of_digits_or_a_time_without_an_offset_is_not_a_time_in_any_body(
    gateway: str, path: str, body_of: Any, loc: list[Any], value: Any, error_type: str
) -> None:
    make_connection("claude-max-1")
    before = written_state()

    response = api("post", path, gateway, body_of(value))

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", *loc], error_type)
    ]
    assert written_state() == before


def test_a_time_written_as_digits_is_refused_with_a_message_saying_so(gateway: str) -> None:
    make_connection("claude-max-1")

    response = post_reading(gateway, {"remaining_percent": 50, "checked_at": "1796114593000"})

    assert response.json()["detail"][0]["msg"] == (
        "Value error, expected an ISO 8601 time with an offset, such as 2026-11-29T12:00:00Z "
        "(a number or a string of digits is not a time)"
    )


@pytest.mark.parametrize(
    ("occurred_at", "message"),
    [
        pytest.param(
            lambda now: "0001-01-01T00:00:00Z",
            "Older than the retention period (14 days) and before the current budget window.",
            id="year-1",
        ),
        pytest.param(
            lambda now: "9999-12-31T23:59:59Z", "More than 60 s in the future.", id="year-9999"
        ),
        pytest.param(
            lambda now: (now + timedelta(seconds=61)).isoformat(),
            "More than 60 s in the future.",
            id="61-s-ahead",
        ),
        pytest.param(
            lambda now: (now - timedelta(days=15)).isoformat(),
            "Older than the retention period (14 days) and before the current budget window.",
            id="15-days-ago",
        ),
    ],
)
def test_spend_dated_beyond_a_minute_ahead_or_the_retention_period_back_is_422_and_not_recorded(
    gateway: str, occurred_at: Any, message: str
) -> None:
    # A daily budget window: every date beyond the retention period is before it.
    LadderSettings.objects.filter(pk=1).update(budget_window="day")
    counters = billing_services.change_counters()

    response = api(
        "post", "/api/v1/spend", gateway, {**SPEND_BODY, "occurred_at": occurred_at(timezone.now())}
    )

    assert response.status_code == 422
    assert response.json() == {
        "detail": [
            {"loc": ["body", "payload", "occurred_at"], "msg": message, "type": "value_error"}
        ]
    }
    assert not SpendEntry.objects.exists()
    assert billing_services.change_counters() == counters


@pytest.mark.parametrize(
    "offset",
    [
        pytest.param(timedelta(seconds=59), id="59-s-ahead"),
        pytest.param(-timedelta(days=13), id="13-days-ago"),
    ],
)
def test_spend_dated_within_a_minute_ahead_or_the_retention_period_back_is_recorded_as_given(
    gateway: str, offset: timedelta
) -> None:
    LadderSettings.objects.filter(pk=1).update(budget_window="day")
    occurred_at = timezone.now().replace(microsecond=0) + offset

    response = api(
        "post", "/api/v1/spend", gateway, {**SPEND_BODY, "occurred_at": occurred_at.isoformat()}
    )

    assert response.status_code == 201
    assert SpendEntry.objects.get().occurred_at == occurred_at
