"""The ladder shell on a real database: readings, events, spend, decisions."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from unittest import mock

import pytest
from django.core.exceptions import ValidationError
from django.db import connection as db_connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from billing import services as billing_services
from ladder import core, services
from ladder.core import SUBSCRIPTION_AUTO_ID, THRIFTY_AUTO_ID, Rung
from ladder.models import (
    Candidate,
    Connection,
    HysteresisTransition,
    LadderSettings,
    QuotaReading,
    SpendEntry,
)
from ladder.services import decisions, readings
from tests.ladder.factories import NOW, make_candidate, make_connection, make_reading

pytestmark = pytest.mark.django_db


def _connection(connection_id: str = "claude-max-1") -> Connection:
    return Connection.objects.select_related("current_reading").get(connection_id=connection_id)


def test_reading_status_is_derived_from_remaining() -> None:
    make_connection()

    safe = make_reading(remaining_percent=40.0).reading
    exhausted = make_reading(remaining_percent=0.0, now=NOW + timedelta(seconds=1)).reading
    unknown = make_reading(now=NOW + timedelta(seconds=2)).reading

    assert (safe.status, exhausted.status, unknown.status) == ("SAFE", "EXHAUSTED", "UNKNOWN")


def test_given_status_is_stored_as_given() -> None:
    make_connection()

    stored = make_reading(status="EXHAUSTED", remaining_percent=50.0).reading

    assert (stored.status, stored.remaining_percent) == ("EXHAUSTED", 50.0)


def test_windows_reduce_to_the_binding_window_ties_take_the_later_reset() -> None:
    make_connection()
    early, late = NOW + timedelta(hours=1), NOW + timedelta(days=3)
    windows = (
        core.WindowReading("five_hour", 30.0, early),
        core.WindowReading("seven_day", 12.0, early),
        core.WindowReading("seven_day_opus", 12.0, late),
        core.WindowReading("unknown", None, None),
    )

    stored = make_reading(windows=windows).reading

    assert (stored.remaining_percent, stored.reset_at, stored.status) == (12.0, late, "SAFE")
    assert [w["name"] for w in stored.windows] == [
        "five_hour",
        "seven_day",
        "seven_day_opus",
        "unknown",
    ]


def test_checked_at_more_than_a_minute_ahead_is_refused_and_nothing_is_stored() -> None:
    make_connection()

    with pytest.raises(ValidationError):
        make_reading(remaining_percent=50.0, checked_at=NOW + timedelta(seconds=61))

    assert QuotaReading.objects.count() == 0


def test_reading_for_an_unknown_connection_is_not_found() -> None:
    with pytest.raises(services.NotFound):
        make_reading("nobody", remaining_percent=50.0)


def test_newest_reading_becomes_current_and_a_late_older_one_is_history() -> None:
    make_connection()
    newest = make_reading(remaining_percent=50.0).reading

    late = make_reading(remaining_percent=1.0, checked_at=NOW - timedelta(minutes=5))

    connection = _connection()
    assert connection.current_reading_id == newest.pk
    assert late.is_current is False
    assert connection.hysteresis_state == "in_play"
    assert QuotaReading.objects.count() == 2


# --- a reading never describes the future (issue 12, item 1) ------------------------------


def _freeze_server_clock(monkeypatch: pytest.MonkeyPatch, at: datetime) -> None:
    """The server's own clock reads `at` (the tests' NOW is in the past)."""
    monkeypatch.setattr(readings, "server_clock", lambda: at)


def _subscription_served(at: datetime) -> list[str | None]:
    return [
        c.connection_id for c in services.decide_registered(SUBSCRIPTION_AUTO_ID, now=at).candidates
    ]


def test_a_future_checked_at_is_stored_as_the_receive_time() -> None:
    make_connection()

    stored = make_reading(remaining_percent=50.0, checked_at=NOW + timedelta(seconds=30), now=NOW)

    connection = _connection()
    assert stored.reading.checked_at == NOW
    assert QuotaReading.objects.get().checked_at == NOW
    assert connection.hysteresis_since == NOW


def _exhausted_event(at: datetime) -> None:
    services.apply_event("claude-max-1", kind="quota_exhausted", now=at)


def _server_stamped_push(at: datetime) -> None:
    services.store_reading("claude-max-1", services.ReadingInput(remaining_percent=0.0), now=at)


def _rejected_headers(at: datetime) -> None:
    # A `success` carrying the upstream's own "rejected": a reading, and no cooldown.
    services.apply_event(
        "claude-max-1",
        kind="success",
        headers={"anthropic-ratelimit-unified-status": "rejected"},
        now=at,
    )


@pytest.mark.parametrize(
    "later_truth",
    [
        pytest.param(_exhausted_event, id="quota-exhausted-event"),
        pytest.param(_server_stamped_push, id="server-stamped-push"),
        pytest.param(_rejected_headers, id="rate-limit-headers"),
    ],
)
def test_after_a_future_dated_push_the_later_truth_is_current_and_subscription_excludes_at_once(
    later_truth: Any,
) -> None:
    make_connection()
    make_candidate()
    make_reading(remaining_percent=80.0, checked_at=NOW + timedelta(seconds=50), now=NOW)
    served_before = _subscription_served(NOW + timedelta(seconds=1))

    later_truth(NOW + timedelta(seconds=5))

    connection = _connection()
    latest = QuotaReading.objects.order_by("-pk").first()
    assert served_before == ["claude-max-1"]
    assert latest is not None
    assert connection.current_reading_id == latest.pk
    assert connection.current_reading.status == "EXHAUSTED"
    assert connection.hysteresis_state == "dropped_out"
    assert _subscription_served(NOW + timedelta(seconds=6)) == []


def test_a_reading_stored_in_the_future_by_the_old_code_is_replaced_by_the_next_one_received(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before checked_at was capped, a reading up to a minute ahead was stored as given.
    connection = make_connection()
    make_candidate()
    ahead = QuotaReading.objects.create(
        connection=connection,
        status="SAFE",
        remaining_percent=80.0,
        checked_at=NOW + timedelta(seconds=40),
    )
    Connection.objects.filter(pk=connection.pk).update(current_reading=ahead)
    _freeze_server_clock(monkeypatch, NOW)

    # Even a reading checked before the receipt replaces it: the row ahead cannot be
    # proven newer than anything received after it.
    stored = make_reading(remaining_percent=0.0, checked_at=NOW - timedelta(seconds=5), now=NOW)

    assert stored.is_current is True
    assert _connection().current_reading_id == stored.reading.pk
    assert _subscription_served(NOW + timedelta(seconds=1)) == []


def test_a_poll_that_started_before_an_exhaustion_event_never_replaces_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The worker stamps its reading with the poll's start; the gateway's report came in
    # while the request was in flight, so it is the later truth (and not "ahead").
    make_connection()
    make_candidate()
    _freeze_server_clock(monkeypatch, NOW + timedelta(seconds=5))
    _rejected_headers(NOW + timedelta(seconds=5))
    event_reading = _connection().current_reading_id
    _freeze_server_clock(monkeypatch, NOW + timedelta(seconds=10))

    polled = services.store_reading(
        "claude-max-1",
        services.ReadingInput(remaining_percent=80.0, checked_at=NOW, source="claude"),
        now=NOW,
    )

    assert polled.is_current is False
    assert _connection().current_reading_id == event_reading
    assert _subscription_served(NOW + timedelta(seconds=11)) == []


# One arrival: how it reaches the server, its status or remaining, how long after the
# previous one it is received, and the checked_at it claims relative to that receipt.
_KINDS = ("push", "exhausted-event", "rejected-headers", "poll", "late-success")
# What a success's answer headers say (a long response that began before the window ran
# out carries them after the 429 that exhausted it).
_HALF_USED = {
    "anthropic-ratelimit-unified-status": "allowed",
    "anthropic-ratelimit-unified-5h-utilization": "0.5",
}
_arrivals = st.lists(
    st.tuples(
        st.sampled_from(_KINDS),
        st.sampled_from((0.0, 1.0, 3.0, 50.0, 90.0, None)),
        st.integers(0, 90),
        st.one_of(st.none(), st.integers(-300, 60)),
    ),
    min_size=1,
    max_size=8,
)


def _receive(kind: str, remaining: float | None, claimed: datetime | None, at: datetime) -> None:
    """One arrival at `at` through the services, as the API or the worker makes it."""
    if kind == "push":
        services.store_reading(
            "plan", services.ReadingInput(remaining_percent=remaining, checked_at=claimed), now=at
        )
    elif kind == "late-success":
        services.apply_event(
            "plan", kind="success", headers=_HALF_USED, observed_at=claimed, now=at
        )
    elif kind == "exhausted-event":
        services.apply_event("plan", kind="quota_exhausted", observed_at=claimed, now=at)
        # Clear the cooldown it wrote: the decision must exclude the plan on its reading.
        Connection.objects.filter(connection_id="plan").update(
            cooldown_until=None, consecutive_failures=0
        )
    elif kind == "rejected-headers":
        services.apply_event(
            "plan",
            kind="success",
            headers={"anthropic-ratelimit-unified-status": "rejected"},
            now=at,
        )
    else:  # a worker poll: stamped with, and told `now` as, the start of its request
        assert claimed is not None
        services.store_reading(
            "plan",
            services.ReadingInput(remaining_percent=remaining, checked_at=claimed, source="claude"),
            now=claimed,
        )


def _claimed(kind: str, offset: int | None, at: datetime) -> datetime | None:
    if kind in ("push", "exhausted-event", "late-success"):  # a reading's or event's claim
        return None if offset is None else at + timedelta(seconds=offset)
    if kind == "poll":  # the request took up to 10 s
        return at - timedelta(seconds=min(abs(offset or 0), 10))
    return None


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=_arrivals, ahead=st.one_of(st.none(), st.integers(1, 60)))
def test_whatever_order_readings_arrive_in_subscription_never_holds_a_plan_exhausted_within_a_minute_of_its_latest_truth(  # noqa: E501
    history: list[tuple[str, float | None, int, int | None]], ahead: int | None
) -> None:
    Connection.objects.all().delete()
    Candidate.objects.all().delete()
    services.clear_caches()
    plan = make_connection("plan")
    make_candidate(connection_id="plan")
    if ahead is not None:  # a row the code before the cap stored ahead of its receipt
        row = QuotaReading.objects.create(
            connection=plan,
            status="SAFE",
            remaining_percent=80.0,
            checked_at=NOW + timedelta(seconds=ahead),
        )
        Connection.objects.filter(pk=plan.pk).update(current_reading=row)
    at = NOW
    truths: list[tuple[datetime, int, str, int]] = []  # observed, position, status, pk
    for position, (kind, remaining, gap, offset) in enumerate(history):
        at += timedelta(seconds=gap)
        claimed = _claimed(kind, offset, at)
        previous = Connection.objects.get(pk=plan.pk).current_reading
        with mock.patch.object(readings, "server_clock", lambda at=at: at):
            _receive(kind, remaining, claimed, at)
        newest = QuotaReading.objects.order_by("-pk").first()
        assert newest is not None
        assert newest.checked_at <= at
        # The oracle: the instant an arrival describes is never after its receipt.
        observed = at if claimed is None else min(claimed, at)
        truths.append((observed, position, newest.status, newest.pk))
        current = Connection.objects.get(pk=plan.pk)
        served = _subscription_served(at + timedelta(seconds=1))
        latest = max(truths)
        minute = timedelta(seconds=60)
        server_stamped = kind == "rejected-headers" or (
            kind in ("push", "exhausted-event", "late-success") and (offset is None or offset >= 0)
        )
        # A truth that is not an exhaustion, received less than a minute after the
        # exhaustion held as current, is held back (api.md: the less safe one wins).
        held_back = (
            newest.status != "EXHAUSTED"
            and previous is not None
            and previous.status == "EXHAUSTED"
            and previous.checked_at <= at < previous.checked_at + minute
        )
        if server_stamped:
            # The truth just received is current at once, whatever was stored before,
            # but for that.
            assert (current.current_reading_id == newest.pk) is not held_back
        exhausted = [t for t in truths if t[2] == "EXHAUSTED"]
        others = [t for t in truths if t[2] != "EXHAUSTED"]
        in_conflict = any(abs(e[0] - o[0]) < minute for e in exhausted for o in others)
        if ahead is None and not in_conflict:
            # The current reading is the one observed last (ties: received last).
            assert current.current_reading_id == latest[3]
        if ahead is None and any(e[0] > latest[0] - minute for e in exhausted):
            # An exhaustion within a minute of the latest truth: nothing outranked it.
            assert served == []
        elif server_stamped and newest.status == "EXHAUSTED":
            assert served == []


def test_hysteresis_drops_out_at_the_cutoff_and_records_the_transition() -> None:
    make_connection()

    stored = make_reading(remaining_percent=1.5)

    connection = _connection()
    assert (connection.hysteresis_state, connection.hysteresis_since) == ("dropped_out", NOW)
    assert stored.transition is not None
    assert list(HysteresisTransition.objects.values_list("state", "at")) == [("dropped_out", NOW)]


def test_hysteresis_needs_more_than_the_reentry_floor_to_come_back() -> None:
    make_connection()
    make_reading(remaining_percent=1.0)

    make_reading(remaining_percent=3.0, now=NOW + timedelta(minutes=1))
    still_out = _connection().hysteresis_state
    make_reading(remaining_percent=6.0, now=NOW + timedelta(minutes=2))

    assert still_out == "dropped_out"
    assert _connection().hysteresis_state == "in_play"
    assert list(HysteresisTransition.objects.order_by("at").values_list("state", flat=True)) == [
        "dropped_out",
        "in_play",
    ]


def test_unknown_remaining_does_not_change_the_hysteresis_state() -> None:
    make_connection()
    make_reading(remaining_percent=1.0)

    make_reading(now=NOW + timedelta(minutes=1))

    assert _connection().hysteresis_state == "dropped_out"


def test_rate_limited_event_backs_off_exponentially_and_replaces_the_cooldown() -> None:
    make_connection()

    first = services.apply_event("claude-max-1", kind="rate_limited", now=NOW)
    second = services.apply_event("claude-max-1", kind="error", now=NOW)
    third = services.apply_event("claude-max-1", kind="rate_limited", now=NOW)

    assert [first.cooldown_seconds, second.cooldown_seconds, third.cooldown_seconds] == [
        5.0,
        10.0,
        20.0,
    ]
    assert third.consecutive_failures == 3
    assert _connection().cooldown_until == NOW + timedelta(seconds=20)


def test_retry_after_is_used_as_given_without_the_cap() -> None:
    make_connection()

    result = services.apply_event(
        "claude-max-1", kind="rate_limited", retry_after_seconds=600.0, now=NOW
    )

    assert (result.cooldown_seconds, result.cooldown_until) == (600.0, NOW + timedelta(minutes=10))


def test_cooldown_is_clamped_to_the_upstream_reset() -> None:
    make_connection()

    result = services.apply_event(
        "claude-max-1",
        kind="rate_limited",
        retry_after_seconds=3600.0,
        reset_at=NOW + timedelta(seconds=90),
        now=NOW,
    )

    assert (result.cooldown_seconds, result.clamped_to_reset) == (90.0, True)
    assert result.cooldown_until == NOW + timedelta(seconds=90)


def test_quota_exhausted_event_stores_an_exhausted_reading() -> None:
    make_connection()
    reset_at = NOW + timedelta(hours=2)

    services.apply_event("claude-max-1", kind="quota_exhausted", reset_at=reset_at, now=NOW)

    reading = _connection().current_reading
    assert reading is not None
    assert (reading.status, reading.remaining_percent, reading.reset_at, reading.source) == (
        "EXHAUSTED",
        0.0,
        reset_at,
        "event",
    )
    assert _connection().hysteresis_state == "dropped_out"


def test_success_a_minute_after_the_failure_clears_failures_and_cooldown() -> None:
    make_connection()
    services.apply_event("claude-max-1", kind="rate_limited", now=NOW)

    result = services.apply_event("claude-max-1", kind="success", now=NOW + timedelta(seconds=60))

    connection = _connection()
    assert (result.cooldown_until, result.consecutive_failures) == (None, 0)
    assert (connection.cooldown_until, connection.consecutive_failures) == (None, 0)
    assert (connection.failure_observed_at, connection.success_observed_at) == (
        NOW,
        NOW + timedelta(seconds=60),
    )


def test_a_success_within_a_minute_of_the_failure_leaves_its_cooldown() -> None:
    make_connection()
    services.apply_event("claude-max-1", kind="rate_limited", retry_after_seconds=600, now=NOW)

    result = services.apply_event("claude-max-1", kind="success", now=NOW + timedelta(seconds=30))

    until = NOW + timedelta(seconds=600)
    assert (result.cooldown_until, result.cooldown_seconds, result.consecutive_failures) == (
        until,
        570.0,
        1,
    )
    connection = _connection()
    assert (connection.cooldown_until, connection.consecutive_failures) == (until, 1)


def test_a_late_success_observed_before_the_exhaustion_does_not_bring_the_plan_back() -> None:
    # A long response began before the window ran out; its success ends after the 429.
    make_connection()
    make_candidate(connection_id="claude-max-1")
    services.apply_event("claude-max-1", kind="quota_exhausted", now=NOW)

    services.apply_event(
        "claude-max-1",
        kind="success",
        headers={"anthropic-ratelimit-unified-5h-utilization": "0.5"},
        observed_at=NOW - timedelta(seconds=5),
        now=NOW + timedelta(seconds=90),
    )

    connection = _connection()
    assert (connection.consecutive_failures, connection.current_reading.status) == (1, "EXHAUSTED")
    assert _subscription_served(NOW + timedelta(seconds=91)) == []


def test_a_success_once_the_cooldown_ended_clears_the_count() -> None:
    make_connection()
    services.apply_event("claude-max-1", kind="rate_limited", retry_after_seconds=5, now=NOW)

    result = services.apply_event("claude-max-1", kind="success", now=NOW + timedelta(seconds=5))

    assert (result.cooldown_until, result.consecutive_failures) == (None, 0)


def test_a_failure_observed_long_before_the_success_that_cleared_is_stale() -> None:
    make_connection()
    services.apply_event("claude-max-1", kind="error", now=NOW)
    services.apply_event("claude-max-1", kind="success", now=NOW + timedelta(seconds=120))

    stale = services.apply_event(
        "claude-max-1",
        kind="error",
        observed_at=NOW + timedelta(seconds=30),
        now=NOW + timedelta(seconds=130),
    )
    near = services.apply_event(
        "claude-max-1",
        kind="error",
        observed_at=NOW + timedelta(seconds=100),
        now=NOW + timedelta(seconds=131),
    )

    assert (stale.cooldown_until, stale.consecutive_failures) == (None, 0)
    assert near.consecutive_failures == 1
    assert _connection().failure_observed_at == NOW + timedelta(seconds=100)


def test_an_exhaustion_from_a_gateway_whose_clock_runs_behind_still_drops_the_plan() -> None:
    make_connection()
    make_candidate(connection_id="claude-max-1")
    services.store_reading(
        "claude-max-1", services.ReadingInput(remaining_percent=80.0, checked_at=NOW), now=NOW
    )

    services.store_reading(
        "claude-max-1",
        services.ReadingInput(status="EXHAUSTED", checked_at=NOW - timedelta(seconds=30)),
        now=NOW + timedelta(seconds=1),
    )

    connection = _connection()
    assert (connection.current_reading.status, connection.hysteresis_state) == (
        "EXHAUSTED",
        "dropped_out",
    )
    assert _subscription_served(NOW + timedelta(seconds=2)) == []


def test_an_event_observed_more_than_a_minute_ahead_is_refused_and_changes_nothing() -> None:
    make_connection()
    before = _event_state()

    with pytest.raises(ValidationError) as refused:
        services.apply_event(
            "claude-max-1", kind="error", observed_at=NOW + timedelta(seconds=61), now=NOW
        )

    assert refused.value.message_dict == {"observed_at": ["More than 60 s in the future."]}
    assert _event_state() == before


def _event_state() -> tuple[list[Any], ...]:
    """Every row an event can write, and the change counters, for before/after checks."""
    return (
        list(Connection.objects.order_by("pk").values()),
        list(QuotaReading.objects.order_by("pk").values()),
        list(HysteresisTransition.objects.order_by("pk").values()),
        [dict(zip(("config", "state"), billing_services.change_counters(), strict=True))],
    )


def test_event_for_an_unknown_connection_changes_nothing() -> None:
    make_connection()
    make_reading(remaining_percent=40.0)
    services.apply_event("claude-max-1", kind="rate_limited", now=NOW)
    before = _event_state()

    with pytest.raises(services.NotFound):
        services.apply_event("ghost", kind="rate_limited", now=NOW + timedelta(seconds=1))

    assert _event_state() == before


def _price(provider: str, model: str, input_price: str, output_price: str) -> None:
    billing_services.upsert_price(
        billing_services.PriceInput(
            provider, model, Decimal(input_price), Decimal(output_price), None
        ),
        actor="test",
    )


def test_spend_cost_is_computed_from_tokens_when_absent() -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    _price("openai", "gpt-4o", "2.5", "10")

    entry, created = services.record_spend(
        services.SpendInput("r1", "openai-key", "openai", "gpt-4o", None, 2000, 500),
        now=NOW,
    )

    assert created is True
    assert (entry.cost_usd, entry.rung, entry.is_cost_computed) == (
        Decimal("0.01000000"),
        "premium",
        True,
    )


def test_spend_is_counted_once_per_request_id() -> None:
    data = services.SpendInput("r1", "k", "openai", "gpt-4o", Decimal("1.25"))
    services.record_spend(data, now=NOW)

    again, created = services.record_spend(
        services.SpendInput("r1", "k", "openai", "gpt-4o", Decimal("9")), now=NOW
    )

    assert (created, again.cost_usd) == (False, Decimal("1.25000000"))
    assert services.spend_summary(now=NOW).rungs["premium"].spent_usd == Decimal("1.25")


def test_plan_included_spend_never_counts_against_a_paid_budget() -> None:
    make_connection()  # claude oauth: subscription
    services.record_spend(
        services.SpendInput("r1", "claude-max-1", "claude", "claude-sonnet-4-5", Decimal("3")),
        now=NOW,
    )

    summary = services.spend_summary(now=NOW)

    assert {name: rung.spent_usd for name, rung in summary.rungs.items()} == {
        "cheap": Decimal(0),
        "premium": Decimal(0),
    }


@pytest.mark.parametrize(
    ("window", "occurred_at", "is_recorded"),
    [
        pytest.param("month", NOW + timedelta(seconds=60), True, id="a-minute-ahead"),
        pytest.param("month", NOW + timedelta(seconds=61), False, id="61-s-ahead"),
        pytest.param("month", datetime(9999, 12, 31, tzinfo=UTC), False, id="year-9999"),
        pytest.param("month", datetime(1, 1, 1, tzinfo=UTC), False, id="year-1"),
        pytest.param("day", NOW - timedelta(days=14), True, id="the-retention-period-back"),
        pytest.param("day", NOW - timedelta(days=14, seconds=1), False, id="beyond-retention"),
        # Spend that still counts against the budget is never refused (a month > 14 days).
        pytest.param("month", datetime(2026, 11, 1, tzinfo=UTC), True, id="in-the-budget-window"),
        pytest.param("month", datetime(2026, 10, 31, 23, 59, tzinfo=UTC), False, id="before-it"),
    ],
)
def test_spend_occurred_at_is_at_most_a_minute_ahead_and_the_retention_period_back(
    window: str, occurred_at: datetime, is_recorded: bool
) -> None:
    LadderSettings.objects.filter(pk=1).update(budget_window=window)
    data = services.SpendInput("r1", "k", "openai", "gpt-4o", Decimal("1"), occurred_at=occurred_at)

    if is_recorded:
        entry, created = services.record_spend(data, now=NOW)
        assert (created, entry.occurred_at) == (True, occurred_at)
    else:
        with pytest.raises(ValidationError) as refused:
            services.record_spend(data, now=NOW)
        assert list(refused.value.message_dict) == ["occurred_at"]
        assert not SpendEntry.objects.exists()


# Spend from before the window is older than the default 14 days' retention: refused.
@override_settings(QUOTA_READING_RETENTION_DAYS=60)
def test_spend_summary_uses_the_calendar_window_and_budget() -> None:
    LadderSettings.objects.filter(pk=1).update(cheap_budget_usd=Decimal("2"), budget_window="month")
    _price("openai", "gpt-4o-mini", "0.15", "0.6")
    services.record_spend(
        services.SpendInput(
            "old",
            "k",
            "openai",
            "gpt-4o-mini",
            Decimal("5"),
            occurred_at=datetime(2026, 10, 31, 23, 59, tzinfo=UTC),
        ),
        now=NOW,
    )
    services.record_spend(
        services.SpendInput("new", "k", "openai", "gpt-4o-mini", Decimal("2")), now=NOW
    )

    summary = services.spend_summary(now=NOW)

    assert (summary.window_start, summary.window_end) == (
        datetime(2026, 11, 1, tzinfo=UTC),
        datetime(2026, 12, 1, tzinfo=UTC),
    )
    cheap = summary.rungs["cheap"]
    assert (cheap.spent_usd, cheap.budget_usd, cheap.is_exhausted) == (
        Decimal("2"),
        Decimal("2"),
        True,
    )


def _world(size: int) -> None:
    make_connection("plan-a")
    make_connection("plan-b")
    make_connection("key", provider="openai", auth_type="apikey")
    make_reading("plan-a", remaining_percent=50.0, now=NOW)
    for index in range(size):
        make_candidate(
            "claude", f"model-{index}", allowed_connection_ids=("plan-a", "plan-b", "key")
        )


def _deciding(captured: CaptureQueriesContext) -> list[str]:
    """The queries of a decision, without the pool timeline's record of it."""
    timeline = ("ladder_pool", "SAVEPOINT")
    sqls = [query["sql"] for query in captured.captured_queries]
    return [sql for sql in sqls if not any(word in sql for word in timeline)]


@pytest.mark.parametrize("auto_id", [SUBSCRIPTION_AUTO_ID, THRIFTY_AUTO_ID], ids=str)
def test_decision_query_count_does_not_grow_with_the_pool(auto_id: object) -> None:
    _world(10)
    services.clear_caches()
    with CaptureQueriesContext(db_connection) as small:
        services.decide_registered(auto_id, now=NOW)  # type: ignore[arg-type]
    _world(490)
    services.clear_caches()
    with CaptureQueriesContext(db_connection) as large:
        decision = services.decide_registered(auto_id, now=NOW)  # type: ignore[arg-type]

    # change counters, settings, catalog, prices, candidates, connections (no budget set:
    # no spend query); the pool timeline's record of the changed membership comes on top
    # (its cost: tests/ladder/services/test_timeline.py)
    assert len(_deciding(small)) == len(_deciding(large)) == 6
    assert len(decision.candidates) + len(decision.excluded) >= 500


def test_a_cached_decision_costs_one_query_and_a_write_invalidates_it() -> None:
    _world(20)
    first = services.decide_registered(SUBSCRIPTION_AUTO_ID, now=NOW)
    with CaptureQueriesContext(db_connection) as cached:
        again = services.decide_registered(SUBSCRIPTION_AUTO_ID, now=NOW + timedelta(seconds=1))

    make_reading("plan-a", remaining_percent=0.0, now=NOW + timedelta(seconds=2))
    after_write = services.decide_registered(SUBSCRIPTION_AUTO_ID, now=NOW + timedelta(seconds=3))

    assert len(cached.captured_queries) == 1
    assert again is first
    assert len(first.candidates) == 20
    assert after_write.candidates == ()


def test_a_cached_decision_expires_when_a_reading_goes_stale() -> None:
    _world(1)
    fresh = services.decide_registered(SUBSCRIPTION_AUTO_ID, now=NOW)

    later = services.decide_registered(SUBSCRIPTION_AUTO_ID, now=NOW + timedelta(seconds=181))

    assert len(fresh.candidates) == 1
    assert later.candidates == ()
    assert [e.reason.value for e in later.excluded if e.connection_id == "plan-a"] == [
        "quota_stale"
    ]


def test_a_cached_decision_is_never_served_for_an_earlier_instant() -> None:
    _world(1)
    services.decide_registered(SUBSCRIPTION_AUTO_ID, now=NOW + timedelta(seconds=5))

    earlier = services.decide_registered(SUBSCRIPTION_AUTO_ID, now=NOW + timedelta(seconds=1))

    assert earlier.computed_at == NOW + timedelta(seconds=1)


class _WatchedComputing(dict):
    """decisions._computing, signalling each lookup (a thread arriving for a decision)."""

    def __init__(self) -> None:
        super().__init__()
        self.lookups = threading.Semaphore(0)

    def get(self, key: object, default: object = None) -> object:
        value = super().get(key, default)
        self.lookups.release()
        return value


def test_concurrent_requests_for_one_decision_compute_it_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The snapshot is loaded here, so the threads below need no database at all.
    _world(3)
    counters = billing_services.change_counters()
    candidates = services.registered_candidates()
    snapshot = services.current_snapshot(counters[0])
    views = services.load_views(services.referenced_connections(candidates), snapshot.catalog)
    leader_inside = threading.Event()
    release = threading.Event()
    loads: list[str] = []

    def slow_load_views(*args: object) -> object:
        loads.append(threading.current_thread().name)
        leader_inside.set()
        release.wait(timeout=10)
        return views

    computing = _WatchedComputing()
    monkeypatch.setattr(decisions, "load_views", slow_load_views)
    monkeypatch.setattr(decisions, "_computing", computing)
    answers: dict[str, object] = {}

    def ask() -> None:
        name = threading.current_thread().name
        answers[name] = services.decide_for(
            THRIFTY_AUTO_ID, candidates, now=NOW, cache_key="k", counters=counters
        )

    threads = [threading.Thread(target=ask, name=n) for n in ("leader", "f1", "f2", "f3")]
    threads[0].start()
    try:
        assert leader_inside.wait(timeout=10)
        for follower in threads[1:]:
            follower.start()
        # Every follower has found the leader's computation running before it finishes.
        assert all(computing.lookups.acquire(timeout=10) for _ in range(4))
    finally:
        release.set()
        for thread in threads:
            thread.join(timeout=10)

    assert loads == ["leader"]
    assert sorted(answers) == ["f1", "f2", "f3", "leader"]
    assert all(answer is answers["leader"] for answer in answers.values())
    assert computing == {}


def test_registered_decision_keeps_only_the_safe_plan_connection() -> None:
    make_connection("plan-a")
    make_connection("plan-b")
    make_reading("plan-a", remaining_percent=50.0)
    make_candidate(allowed_connection_ids=("plan-b", "plan-a"))

    decision = services.decide_registered(SUBSCRIPTION_AUTO_ID, now=NOW + timedelta(seconds=5))

    assert [(c.rung, c.allowed_connection_ids) for c in decision.candidates] == [
        (Rung.SUBSCRIPTION, ("plan-a",))
    ]
    assert [(e.connection_id, e.reason.value) for e in decision.excluded] == [
        ("plan-b", "quota_unknown")
    ]


def test_unregistered_connection_ids_are_uncurated() -> None:
    make_candidate(connection_id="never-registered")

    decision = services.decide_registered(SUBSCRIPTION_AUTO_ID, now=NOW)

    assert [(e.connection_id, e.reason.value) for e in decision.excluded] == [
        ("never-registered", "uncurated")
    ]


def test_unknown_category_names_the_known_ones() -> None:
    make_connection()
    make_candidate(categories=("coding", "chat"))

    with pytest.raises(services.UnknownCategory, match="known: chat, coding"):
        services.decide_registered(core.parse_auto_id("auto/poetry:thrifty"), now=NOW)


def test_settings_update_is_audited_and_refuses_bad_values_without_change() -> None:
    values = {
        "exit_cutoff_percent": 3.0,
        "reentry_min_remaining_percent": 8.0,
        "cheap_budget_usd": Decimal("10"),
        "premium_budget_usd": None,
        "budget_window": "week",
        "max_state_age_seconds": 120,
        "base_cooldown_seconds": 2.0,
        "max_cooldown_seconds": 60.0,
        "cheap_max_input_usd_per_mtok": Decimal("0.5"),
    }
    services.update_settings(values, actor="ana")

    with pytest.raises(ValidationError):
        services.update_settings({**values, "exit_cutoff_percent": 101.0}, actor="bo")

    config = services.load_config()
    assert (config.exit_cutoff_percent, config.budget_window, config.cheap_budget_usd) == (
        3.0,
        "week",
        Decimal("10"),
    )
    from billing.models import AuditEntry

    assert list(AuditEntry.objects.values_list("target_type", "actor")) == [("settings", "ana")]


def test_prune_keeps_current_readings() -> None:
    make_connection()
    old = make_reading(remaining_percent=50.0, now=NOW - timedelta(days=30)).reading
    make_connection("other")
    only = make_reading("other", remaining_percent=50.0, now=NOW - timedelta(days=30)).reading
    make_reading(remaining_percent=40.0, now=NOW)

    deleted = services.prune_readings(older_than=NOW - timedelta(days=14))

    assert deleted == 1
    assert not QuotaReading.objects.filter(pk=old.pk).exists()
    assert QuotaReading.objects.filter(pk=only.pk).exists()


def test_rate_limit_headers_become_a_reading_and_feed_the_clamp() -> None:
    make_connection()
    reset = int((NOW + timedelta(minutes=5)).timestamp())
    headers = {
        "Retry-After": "3600",
        "anthropic-ratelimit-unified-status": "rejected",
        "anthropic-ratelimit-unified-reset": str(reset),
        "anthropic-ratelimit-unified-5h-utilization": "1.0",
        "anthropic-ratelimit-unified-5h-reset": str(reset),
    }

    result = services.apply_event("claude-max-1", kind="rate_limited", headers=headers, now=NOW)

    reading = _connection().current_reading
    assert (result.cooldown_seconds, result.clamped_to_reset) == (300.0, True)
    assert (reading.status, reading.remaining_percent, reading.source) == (
        "EXHAUSTED",
        0.0,
        "headers",
    )
    assert reading.reset_at == NOW + timedelta(minutes=5)


def test_headers_with_only_a_reset_time_leave_the_reading_alone() -> None:
    make_connection()
    good = make_reading(remaining_percent=60.0).reading

    services.apply_event(
        "claude-max-1",
        kind="rate_limited",
        headers={"x-ratelimit-reset-requests": "20s"},
        now=NOW + timedelta(seconds=1),
    )

    assert _connection().current_reading_id == good.pk


def test_an_update_only_write_never_creates_a_connection() -> None:
    with pytest.raises(services.NotFound):
        services.upsert_connection(
            "gone", services.ConnectionInput("claude", "oauth"), must_exist=True
        )

    assert not Connection.objects.filter(connection_id="gone").exists()


def test_a_create_only_write_never_replaces_a_connection() -> None:
    make_connection("plan", label="original")

    with pytest.raises(services.ConnectionExists):
        services.upsert_connection(
            "plan", services.ConnectionInput("claude", "oauth", label="other"), must_exist=False
        )

    assert Connection.objects.get(connection_id="plan").label == "original"


# --- every stored number fits its column, from any path -----------------------------------


def test_a_computed_spend_cost_that_rounds_past_its_column_is_refused_and_stores_nothing() -> None:
    # 99,999,999.999999 USD per million input tokens for a million tokens, plus 995,000
    # output tokens at a millionth of a dollar per million: 99,999,999.999999995 USD,
    # below 1e8 but 100,000,000.00000000 once rounded to the column's 8 decimals.
    make_connection("openai-key", provider="openai", auth_type="apikey")
    _price("openai", "absurd", "99999999.999999", "0.000001")

    with pytest.raises(ValidationError) as refused:
        services.record_spend(
            services.SpendInput("r1", "openai-key", "openai", "absurd", None, 1_000_000, 995_000),
            now=NOW,
        )

    assert refused.value.message_dict == {
        "cost_usd": ["A request's cost must be between 0 and 99,999,999.99999999 USD."]
    }
    assert list(SpendEntry.objects.all()) == []


@pytest.mark.parametrize(
    "cost",
    [Decimal("NaN"), Decimal("sNaN"), Decimal("-0.01"), Decimal("1e999999"), Decimal("Infinity")],
    ids=["nan", "signalling-nan", "negative", "1e999999", "infinite"],
)
def test_a_reported_spend_cost_outside_its_column_is_refused(cost: Decimal) -> None:
    with pytest.raises(ValidationError):
        services.record_spend(services.SpendInput("r1", "k", "openai", "gpt-4o", cost), now=NOW)

    assert list(SpendEntry.objects.all()) == []


@pytest.mark.parametrize(
    "fields",
    [
        {"remaining_percent": 150.0},
        {"remaining_percent": -1.0},
        {"remaining_percent": float("nan")},
        {"remaining_percent": float("inf")},
        {"windows": (core.WindowReading("five_hour", 100.5, None),)},
        {"windows": (core.WindowReading("five_hour", float("nan"), None),)},
    ],
    ids=["above-100", "negative", "nan", "infinite", "window-above-100", "window-nan"],
)
def test_a_reading_percent_outside_0_to_100_is_refused_by_the_service(
    fields: dict[str, Any],
) -> None:
    # The API's schema bounds them too; the service holds for every other path.
    make_connection()

    with pytest.raises(ValidationError):
        make_reading(**fields)

    assert list(QuotaReading.objects.all()) == []
    assert Connection.objects.get().current_reading_id is None
