"""Readings and events move the `state` change counter only when they can change a pool
(ladder/core/changes.py), store nothing for a success with nothing to clear, and cost a
pinned number of queries each."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from billing import services as billing_services
from ladder import services
from ladder.models import Connection, HysteresisTransition, LadderSettings, QuotaReading
from tests.ladder.factories import NOW, make_connection, make_reading

pytestmark = pytest.mark.django_db

RESET = NOW + timedelta(hours=2)

# Anthropic's unified limiter, 40 % used of the five-hour window.
HEADERS_40 = {
    "anthropic-ratelimit-unified-status": "allowed",
    "anthropic-ratelimit-unified-5h-utilization": "0.4",
}


def _state() -> int:
    return billing_services.change_counters()[1]


def _warm() -> None:
    """Load this process's snapshot, as every web process has after its first request."""
    services.current_snapshot(billing_services.change_counters()[0])


def _rows() -> tuple[list[Any], ...]:
    return (
        list(Connection.objects.order_by("pk").values()),
        list(QuotaReading.objects.order_by("pk").values()),
        list(HysteresisTransition.objects.order_by("pk").values()),
    )


def _connection() -> Connection:
    return Connection.objects.select_related("current_reading").get(connection_id="claude-max-1")


# --- readings ------------------------------------------------------------------------------


def test_a_reading_that_changes_no_standing_is_stored_without_a_bump() -> None:
    make_connection()
    make_reading(remaining_percent=50.0)
    state = _state()

    later = NOW + timedelta(seconds=30)
    stored = make_reading(remaining_percent=42.0, now=later)

    assert stored.is_current is True
    assert _connection().current_reading_id == stored.reading.pk
    assert _state() == state


def test_a_reading_that_excludes_the_connection_bumps_once() -> None:
    make_connection()
    make_reading(remaining_percent=50.0)
    state = _state()

    make_reading(remaining_percent=1.0, now=NOW + timedelta(seconds=30))

    assert (_connection().hysteresis_state, _state()) == ("dropped_out", state + 1)


def test_a_reading_in_the_band_still_moves_the_hysteresis_without_a_bump() -> None:
    # Dropped out at 1 %, then 3 % and 4 %: below re-entry either way (same reset, none).
    make_connection()
    make_reading(remaining_percent=1.0)
    make_reading(remaining_percent=3.0, now=NOW + timedelta(seconds=10))
    state = _state()

    make_reading(remaining_percent=4.0, now=NOW + timedelta(seconds=30))

    assert (_connection().current_reading.remaining_percent, _state()) == (4.0, state)


def test_a_reading_with_an_earlier_reset_bumps() -> None:
    make_connection()
    make_reading(remaining_percent=50.0)
    state = _state()

    make_reading(
        remaining_percent=50.0, reset_at=NOW + timedelta(seconds=60), now=NOW + timedelta(seconds=1)
    )

    assert _state() == state + 1


def test_a_late_reading_kept_as_history_does_not_bump() -> None:
    make_connection()
    make_reading(remaining_percent=50.0, now=NOW + timedelta(seconds=30))
    state = _state()

    stored = services.store_reading(
        "claude-max-1",
        services.ReadingInput(remaining_percent=1.0, checked_at=NOW),
        now=NOW + timedelta(seconds=31),
    )

    assert (stored.is_current, _state()) == (False, state)


def test_the_first_reading_of_a_connection_bumps() -> None:
    make_connection()
    state = _state()

    make_reading(remaining_percent=50.0)

    assert _state() == state + 1


def test_a_reading_costs_a_constant_number_of_queries(django_assert_num_queries: Any) -> None:
    make_connection()
    make_reading(remaining_percent=50.0)
    _warm()

    # counters; savepoint; lock; insert reading; update connection; release; the config
    # counter once committed (readings.settle_config_race).
    with django_assert_num_queries(7):
        make_reading(remaining_percent=42.0, now=NOW + timedelta(seconds=30))
    # ... and one more when it drops out: the transition row and the bump, but no config
    # counter (the bump has announced it whatever the config).
    with django_assert_num_queries(8):
        make_reading(remaining_percent=1.0, now=NOW + timedelta(seconds=31))


# --- events --------------------------------------------------------------------------------


def test_a_success_with_nothing_to_clear_stores_nothing_in_one_query(
    django_assert_num_queries: Any,
) -> None:
    make_connection()
    make_reading(remaining_percent=50.0)
    before, state = _rows(), _state()

    with django_assert_num_queries(1):
        result = services.apply_event("claude-max-1", kind="success", now=NOW)

    assert (result.cooldown_until, result.cooldown_seconds, result.consecutive_failures) == (
        None,
        0.0,
        0,
    )
    assert (_rows(), _state()) == (before, state)


def test_a_success_for_an_unknown_connection_is_not_found_after_one_query(
    django_assert_num_queries: Any,
) -> None:
    with django_assert_num_queries(1), pytest.raises(services.NotFound):
        services.apply_event("ghost", kind="success", now=NOW)


def test_a_success_clearing_a_cooldown_in_force_bumps(django_assert_num_queries: Any) -> None:
    make_connection()
    services.apply_event("claude-max-1", kind="rate_limited", retry_after_seconds=600, now=NOW)
    _warm()
    state = _state()

    # lookup; counters; savepoint; lock; update; bump; release.
    with django_assert_num_queries(7):
        services.apply_event("claude-max-1", kind="success", now=NOW + timedelta(seconds=60))

    connection = _connection()
    assert (connection.cooldown_until, connection.consecutive_failures, _state()) == (
        None,
        0,
        state + 1,
    )


def test_a_success_clearing_only_the_failure_count_writes_without_a_bump(
    django_assert_num_queries: Any,
) -> None:
    make_connection()
    services.apply_event("claude-max-1", kind="rate_limited", now=NOW)  # cools 5 s
    _warm()
    state = _state()

    # lookup; counters; savepoint; lock; update; release; the config counter once
    # committed (no bump, so readings.settle_config_race reads it).
    with django_assert_num_queries(7):
        services.apply_event("claude-max-1", kind="success", now=NOW + timedelta(seconds=6))

    connection = _connection()
    assert (connection.cooldown_until, connection.consecutive_failures, _state()) == (
        None,
        0,
        state,
    )


def test_a_new_cooldown_bumps_in_a_pinned_number_of_queries(
    django_assert_num_queries: Any,
) -> None:
    make_connection()
    _warm()
    state = _state()

    # counters; savepoint; lock; update; bump; release.
    with django_assert_num_queries(6):
        result = services.apply_event("claude-max-1", kind="rate_limited", now=NOW)

    assert (result.cooldown_seconds, _state()) == (5.0, state + 1)


def test_a_cooldown_replaced_by_one_with_the_same_end_does_not_bump() -> None:
    make_connection()
    services.apply_event("claude-max-1", kind="error", retry_after_seconds=30, now=NOW)
    state = _state()

    later = NOW + timedelta(seconds=10)
    result = services.apply_event("claude-max-1", kind="error", retry_after_seconds=20, now=later)

    assert (result.cooldown_until, result.consecutive_failures) == (
        NOW + timedelta(seconds=30),
        2,
    )
    assert (_connection().consecutive_failures, _state()) == (2, state)


def test_a_cooldown_replaced_by_one_with_another_end_bumps() -> None:
    make_connection()
    services.apply_event("claude-max-1", kind="error", retry_after_seconds=30, now=NOW)
    state = _state()

    services.apply_event("claude-max-1", kind="error", retry_after_seconds=5, now=NOW)

    assert _state() == state + 1


def test_a_quota_exhausted_event_writes_cooldown_and_reading_with_one_bump(
    django_assert_num_queries: Any,
) -> None:
    make_connection()
    make_reading(remaining_percent=50.0)
    _warm()
    state = _state()

    # counters; savepoint; lock; insert reading; insert transition; update; bump; release.
    with django_assert_num_queries(8):
        services.apply_event("claude-max-1", kind="quota_exhausted", reset_at=RESET, now=NOW)

    connection = _connection()
    assert connection.current_reading.status == "EXHAUSTED"
    assert (connection.hysteresis_state, connection.consecutive_failures) == ("dropped_out", 1)
    assert _state() == state + 1


def test_a_success_with_quota_headers_that_change_no_standing_stores_the_reading_only(
    django_assert_num_queries: Any,
) -> None:
    make_connection()
    make_reading(remaining_percent=50.0)
    _warm()
    state = _state()

    # counters; savepoint; lock; insert reading; update; release; the config counter.
    with django_assert_num_queries(7):
        services.apply_event(
            "claude-max-1", kind="success", headers=HEADERS_40, now=NOW + timedelta(seconds=5)
        )

    reading = _connection().current_reading
    assert (reading.source, reading.remaining_percent, _state()) == ("headers", 60.0, state)


def test_events_use_the_cached_snapshot_not_a_settings_load_per_call(
    django_assert_num_queries: Any,
) -> None:
    make_connection()
    _warm()
    LadderSettings.objects.filter(pk=1).update(base_cooldown_seconds=7)  # no config bump

    result = services.apply_event("claude-max-1", kind="rate_limited", now=NOW)

    assert result.cooldown_seconds == 5.0
