"""Billing evidence, windows scoped to a model and a reserve per connection, on a real
database through the services (spec/ladder.md: "Billing evidence from the wire",
"Windows scoped to a model", "A reserve per connection")."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from billing.models import AuditEntry
from ladder import services
from ladder.core import SUBSCRIPTION_AUTO_ID, THRIFTY_AUTO_ID, Reason
from ladder.core.types import OverageEvidence, OverageSays, WindowReading
from ladder.models import Connection, NotificationDelivery
from ladder.services import notifications
from tests.billing.factories import make_price
from tests.ladder.factories import (
    NOW,
    make_candidate,
    make_connection,
    make_reading,
    make_webhook,
)

pytestmark = pytest.mark.django_db

OPUS = "claude-opus-4-1"
SONNET = "claude-sonnet-4-5"
IN_2H = NOW + timedelta(hours=2)
IN_3D = NOW + timedelta(days=3)


def _prices() -> None:
    make_price("claude", OPUS, input_usd="15", output_usd="75")
    make_price("claude", SONNET, input_usd="3", output_usd="15")


def _decide(auto_id: Any = SUBSCRIPTION_AUTO_ID, at: Any = NOW) -> Any:
    return services.decide_registered(auto_id, now=at + timedelta(seconds=1))


def _served(decision: Any) -> list[tuple[str, str, str]]:
    return [(c.model, c.rung.label, c.connection_id) for c in decision.candidates]


def _excluded(decision: Any) -> list[tuple[str, str, Reason]]:
    return [(e.model, e.connection_id, e.reason) for e in decision.excluded]


def _can_meter(source: str = "usage") -> OverageEvidence:
    return OverageEvidence(OverageSays.CAN_METER, "the usage says spend.enabled: true", source)


# --- billing evidence --------------------------------------------------------------------


def test_can_meter_evidence_takes_a_hard_stop_plan_out_of_subscription_naming_it() -> None:
    make_connection()
    make_candidate()
    make_reading(remaining_percent=60.0, evidence=_can_meter())

    decision = _decide()

    assert _served(decision) == []
    [exclusion] = decision.excluded
    assert exclusion.reason == Reason.OVERAGE_NOT_HARD_STOP
    assert exclusion.detail.startswith(
        "Live evidence says it can bill past the plan: the usage says spend.enabled: true "
        "(usage endpoint, seen 2026-11-29 12:00:00 UTC); the catalog says hard-stop"
    )


def test_started_metering_is_audited_once_with_the_evidence() -> None:
    make_connection()
    make_reading(remaining_percent=60.0, evidence=_can_meter())
    make_reading(remaining_percent=59.0, evidence=_can_meter(), now=NOW + timedelta(seconds=30))

    entries = AuditEntry.objects.filter(target_type="connection", actor="evidence")
    assert [
        (e.action, e.before["effective_overage"], e.after["effective_overage"]) for e in entries
    ] == [("update", "hard-stop", "meters-to-paid")]
    assert entries[0].after["evidence"]["detail"] == "the usage says spend.enabled: true"


def test_newer_hard_stop_evidence_brings_the_plan_back_and_is_audited() -> None:
    make_connection()
    make_candidate()
    make_reading(remaining_percent=60.0, evidence=_can_meter())
    hard = OverageEvidence(OverageSays.HARD_STOP, "the usage says spend.enabled: false")

    make_reading(remaining_percent=60.0, evidence=hard, now=NOW + timedelta(seconds=60))

    assert _served(_decide(at=NOW + timedelta(seconds=60))) == [
        (SONNET, "subscription", "claude-max-1")
    ]
    assert list(
        AuditEntry.objects.filter(actor="evidence").values_list(
            "after__effective_overage", flat=True
        )
    ) == ["hard-stop", "meters-to-paid"]


def test_hard_stop_evidence_less_than_a_minute_after_can_meter_is_history() -> None:
    make_connection()
    make_candidate()
    make_reading(remaining_percent=60.0, evidence=_can_meter())
    hard = OverageEvidence(OverageSays.HARD_STOP, "the usage says spend.enabled: false")

    make_reading(remaining_percent=60.0, evidence=hard, now=NOW + timedelta(seconds=59))

    assert Connection.objects.get().overage_evidence["says"] == "can_meter"
    assert _served(_decide(at=NOW + timedelta(seconds=59))) == []


def test_can_meter_evidence_observed_30_s_before_hard_stop_still_wins() -> None:
    make_connection()
    hard = OverageEvidence(OverageSays.HARD_STOP, "the usage says spend.enabled: false")
    make_reading(remaining_percent=60.0, evidence=hard)

    make_reading(
        remaining_percent=60.0, evidence=_can_meter(), checked_at=NOW - timedelta(seconds=30)
    )

    assert Connection.objects.get().overage_evidence["says"] == "can_meter"


def test_older_evidence_never_replaces_newer() -> None:
    make_connection()
    make_reading(remaining_percent=60.0, evidence=_can_meter())
    hard = OverageEvidence(OverageSays.HARD_STOP, "the usage says spend.enabled: false")

    make_reading(remaining_percent=60.0, evidence=hard, checked_at=NOW - timedelta(minutes=5))

    assert Connection.objects.get().overage_evidence["says"] == "can_meter"


def test_a_reading_without_evidence_leaves_the_evidence_unchanged() -> None:
    make_connection()
    make_reading(remaining_percent=60.0, evidence=_can_meter())

    make_reading(remaining_percent=50.0, now=NOW + timedelta(seconds=30))

    assert Connection.objects.get().overage_evidence["says"] == "can_meter"


def test_hard_stop_evidence_never_makes_an_unknown_overage_plan_safe() -> None:
    make_connection("copilot-1", provider="copilot", auth_type="apikey")
    make_candidate("copilot", "gpt-4.1", connection_id="copilot-1")
    hard = OverageEvidence(OverageSays.HARD_STOP, "overage_permitted: false on every snapshot")

    make_reading("copilot-1", remaining_percent=60.0, evidence=hard)

    decision = _decide()
    assert _served(decision) == []
    assert _excluded(decision) == [("gpt-4.1", "copilot-1", Reason.OVERAGE_NOT_HARD_STOP)]


def test_overage_header_on_an_event_takes_the_plan_out() -> None:
    make_connection()
    make_candidate()
    make_reading(remaining_percent=60.0)

    services.apply_event(
        "claude-max-1",
        kind="success",
        headers={"anthropic-ratelimit-unified-overage-in-use": "true"},
        now=NOW + timedelta(seconds=1),
    )

    stored = Connection.objects.get().overage_evidence
    assert (stored["says"], stored["source"]) == ("can_meter", "headers")
    assert _excluded(_decide()) == [(SONNET, "claude-max-1", Reason.OVERAGE_NOT_HARD_STOP)]


def test_thrifty_uses_a_plan_that_can_meter_only_with_a_current_reading_of_headroom() -> None:
    make_connection()
    make_candidate()
    make_reading(remaining_percent=60.0, evidence=_can_meter())

    with_headroom = _decide(THRIFTY_AUTO_ID)
    unknown_later = _decide(THRIFTY_AUTO_ID, at=NOW + timedelta(hours=1))

    assert [(c.model, c.rung.label) for c in with_headroom.candidates] == [(SONNET, "subscription")]
    assert unknown_later.candidates == ()
    assert _excluded(unknown_later) == [(SONNET, "claude-max-1", Reason.QUOTA_STALE)]


def test_thrifty_still_fails_open_on_a_hard_stop_plan_with_a_stale_reading() -> None:
    make_connection()
    make_candidate()
    make_reading(remaining_percent=60.0)

    decision = _decide(THRIFTY_AUTO_ID, at=NOW + timedelta(hours=1))

    assert [(c.model, c.rung.label) for c in decision.candidates] == [(SONNET, "subscription")]


def test_started_metering_is_notified_once() -> None:
    make_webhook(kinds=("started_metering",))
    make_connection()
    make_reading(remaining_percent=60.0, evidence=_can_meter())

    first = notifications.evaluate_notifications(now=NOW + timedelta(seconds=5))
    again = notifications.evaluate_notifications(now=NOW + timedelta(seconds=10))

    assert (len(first), again) == (1, [])
    delivery = NotificationDelivery.objects.get()
    assert (delivery.kind, delivery.event_key) == ("started_metering", "metering:claude-max-1#1")
    assert delivery.summary.startswith(
        "Plan connection claude-max-1 can bill past its limit: the usage says spend.enabled: "
        "true (seen via usage at 2026-11-29T12:00:00"
    )


# --- windows scoped to a model -----------------------------------------------------------


def _scoped_reading(opus_left: float, **fields: Any) -> Any:
    windows = (
        WindowReading("five_hour", 70.0, IN_2H),
        WindowReading("seven_day", 40.0, IN_3D),
        WindowReading("seven_day_opus", opus_left, IN_3D, "opus"),
        WindowReading("seven_day_sonnet", 80.0, IN_3D, "sonnet"),
    )
    return make_reading(windows=windows, **fields)


def test_an_exhausted_opus_cap_takes_opus_out_and_leaves_sonnet() -> None:
    _prices()
    make_connection()
    make_candidate(model=OPUS)
    make_candidate(model=SONNET)

    stored = _scoped_reading(0.0).reading

    assert (stored.status, stored.remaining_percent) == ("SAFE", 40.0)
    decision = _decide()
    assert [c.model for c in decision.candidates] == [SONNET]
    [exclusion] = decision.excluded
    assert (exclusion.model, exclusion.reason) == (OPUS, Reason.QUOTA_EXHAUSTED)
    assert exclusion.detail == (
        "Model scope opus: Upstream reports EXHAUSTED with 0.0 % left, "
        "until its reset at 2026-12-02 12:00:00 UTC"
    )
    assert decision.next_change_at == IN_3D


def test_scoped_hysteresis_is_kept_per_scope() -> None:
    _prices()
    make_connection()
    make_candidate(model=OPUS)
    _scoped_reading(1.0)

    _scoped_reading(4.0, now=NOW + timedelta(seconds=30))

    connection = Connection.objects.get()
    assert connection.scoped_state["opus"]["state"] == "dropped_out"
    assert connection.scoped_state["sonnet"]["state"] == "in_play"
    assert connection.hysteresis_state == "in_play"
    decision = _decide(at=NOW + timedelta(seconds=30))
    assert _excluded(decision) == [(OPUS, "claude-max-1", Reason.BELOW_REENTRY)]


def test_a_scope_naming_no_known_model_binds_the_whole_connection() -> None:
    _prices()
    make_connection()
    make_candidate(model=SONNET)
    windows = (
        WindowReading("seven_day", 40.0, IN_3D),
        WindowReading("seven_day_iguana", 0.0, IN_3D, "iguana"),
    )
    make_reading(windows=windows)

    decision = _decide()

    assert decision.candidates == ()
    assert _excluded(decision) == [(SONNET, "claude-max-1", Reason.QUOTA_EXHAUSTED)]


def test_a_model_scoped_rejection_cools_only_that_model() -> None:
    _prices()
    make_connection()
    make_candidate(model=OPUS)
    make_candidate(model=SONNET)
    make_reading(remaining_percent=60.0, reset_at=IN_3D)
    reset = str(int(IN_2H.timestamp()))

    result = services.apply_event(
        "claude-max-1",
        kind="rate_limited",
        model=OPUS,
        headers={
            "anthropic-ratelimit-unified-status": "rejected",
            "anthropic-ratelimit-unified-7d_oi-status": "rejected",
            "anthropic-ratelimit-unified-7d_oi-reset": reset,
            "retry-after": "600",
        },
        now=NOW + timedelta(seconds=1),
    )

    connection = Connection.objects.get()
    assert (connection.cooldown_until, connection.consecutive_failures) == (None, 0)
    assert result.cooldown_until == NOW + timedelta(seconds=601)
    decision = _decide()
    assert [c.model for c in decision.candidates] == [SONNET]
    assert _excluded(decision)[0] == (OPUS, "claude-max-1", Reason.COOLING_DOWN)


def test_status_lists_each_scope() -> None:
    _prices()
    make_connection()
    _scoped_reading(0.0)

    status = services.scoped_status(Connection.objects.get(), NOW)

    assert [(s["model_scope"], s["remaining_percent"], s["reset_at"]) for s in status] == [
        ("opus", 0.0, IN_3D),
        ("sonnet", 80.0, IN_3D),
    ]
    assert status[0]["hysteresis"]["state"] == "dropped_out"


# --- a reserve per connection ------------------------------------------------------------


def test_a_connections_own_exit_cutoff_applies_and_the_sentence_says_so() -> None:
    make_connection(exit_cutoff_percent=30.0, reentry_min_remaining_percent=40.0)
    make_connection("claude-max-2")
    make_candidate(allowed_connection_ids=("claude-max-1", "claude-max-2"))
    make_reading(remaining_percent=25.0)
    make_reading("claude-max-2", remaining_percent=25.0)

    decision = _decide()

    assert [c.allowed_connection_ids for c in decision.candidates] == [("claude-max-2",)]
    [exclusion] = decision.excluded
    assert exclusion.reason == Reason.QUOTA_EXHAUSTED
    assert exclusion.detail == (
        "25.0 % left, at or below the exit cutoff of 30 % (this connection's own reserve)"
    )
    assert Connection.objects.get(connection_id="claude-max-1").hysteresis_state == "dropped_out"


def test_a_reserve_floor_below_its_cutoff_is_refused_naming_both_and_changes_nothing() -> None:
    make_connection()

    with pytest.raises(ValidationError) as caught:
        make_connection(exit_cutoff_percent=30.0, reentry_min_remaining_percent=10.0)

    assert set(caught.value.message_dict) == {
        "exit_cutoff_percent",
        "reentry_min_remaining_percent",
    }
    connection = Connection.objects.get()
    assert (connection.exit_cutoff_percent, connection.reentry_min_remaining_percent) == (
        None,
        None,
    )


def test_a_reserve_change_is_audited() -> None:
    make_connection()

    make_connection(exit_cutoff_percent=30.0)

    entry = AuditEntry.objects.filter(target_type="connection", action="update").get()
    assert (entry.before["exit_cutoff_percent"], entry.after["exit_cutoff_percent"]) == (
        None,
        30.0,
    )
