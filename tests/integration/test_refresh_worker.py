"""Quota refresh with a real Celery worker and beat on the real broker, polling a local
fake usage endpoint over HTTP."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ladder import services
from ladder.models import Connection, QuotaReading
from tests.integration.harness import ScriptedUpstream, Worker, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _claude_payload(utilization: float, resets_at: datetime) -> dict[str, Any]:
    return {
        "five_hour": {"utilization": utilization, "resets_at": resets_at.isoformat()},
        "seven_day": {
            "utilization": 10.0,
            "resets_at": (resets_at + timedelta(days=5)).isoformat(),
        },
    }


def _plan_connection() -> str:
    connection_id = f"claude-{uuid.uuid4().hex[:8]}"
    services.upsert_connection(
        connection_id,
        services.ConnectionInput(
            "claude", "oauth", quota_source="claude", credential="sk-ant-oat01-test-token"
        ),
    )
    return connection_id


def _current(connection_id: str) -> QuotaReading | None:
    connection = Connection.objects.select_related("current_reading").get(
        connection_id=connection_id
    )
    return connection.current_reading


def test_a_new_connection_gets_its_first_reading_from_the_beat(
    upstream: ScriptedUpstream, worker: Worker
) -> None:
    resets_at = datetime.now(UTC) + timedelta(hours=3)
    upstream.script = lambda path: (200, _claude_payload(40.0, resets_at))

    connection_id = _plan_connection()

    reading = wait_until(lambda: _current(connection_id), timeout=20)
    assert (reading.status, reading.remaining_percent, reading.source) == ("SAFE", 60.0, "claude")
    assert reading.reset_at == resets_at


@pytest.mark.parametrize(
    ("status", "body", "cause"),
    [
        pytest.param(500, {"error": "boom"}, "upstream_error", id="http-500"),
        pytest.param(200, b"<html>not json</html>", "unparseable", id="garbage"),
        pytest.param(401, {"error": "expired"}, "credential_rejected", id="http-401"),
    ],
)
def test_a_failing_upstream_yields_unknown_never_a_stale_safe(
    upstream: ScriptedUpstream, worker: Worker, status: int, body: Any, cause: str
) -> None:
    connection_id = _plan_connection()
    # A SAFE reading from earlier, old enough to be due for a refresh.
    services.store_reading(
        connection_id,
        services.ReadingInput(
            remaining_percent=80.0, checked_at=datetime.now(UTC) - timedelta(minutes=10)
        ),
    )
    upstream.script = lambda path: (status, body)

    reading = wait_until(
        lambda: (r := _current(connection_id)) is not None and r.status == "UNKNOWN" and r,
        timeout=20,
    )

    assert reading.remaining_percent is None
    assert reading.detail.startswith(cause)
    assert QuotaReading.objects.filter(connection__connection_id=connection_id).count() == 2


def test_an_exhausted_plan_is_read_again_right_after_its_reset(
    upstream: ScriptedUpstream, worker: Worker
) -> None:
    reset_at = datetime.now(UTC) + timedelta(seconds=4)

    def script(path: str) -> tuple[int, Any]:
        if datetime.now(UTC) < reset_at:
            return 200, _claude_payload(100.0, reset_at)
        return 200, _claude_payload(3.0, reset_at + timedelta(hours=5))

    upstream.script = script
    connection_id = _plan_connection()
    exhausted = wait_until(
        lambda: (r := _current(connection_id)) is not None and r.status == "EXHAUSTED" and r,
        timeout=20,
    )
    assert exhausted.reset_at == reset_at

    fresh = wait_until(
        lambda: (r := _current(connection_id)) is not None and r.status == "SAFE" and r,
        timeout=15,
    )

    lag = (fresh.checked_at - reset_at).total_seconds()
    assert 0 <= lag <= 5, f"re-entry lag {lag:.2f} s"
    assert fresh.remaining_percent == 90.0  # the seven-day window now binds
    connection = Connection.objects.get(connection_id=connection_id)
    assert connection.hysteresis_state == "in_play"
