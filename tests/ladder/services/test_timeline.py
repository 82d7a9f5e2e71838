"""The pool timeline recorded over the real database (ladder/services/timeline.py): a
scripted sequence of readings, events, spend and time passing gives exactly these
transitions, in this order; recording costs no query when nothing changed."""

from __future__ import annotations

import threading
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection as db_connection
from django.db import connections
from django.test.utils import CaptureQueriesContext

from billing import services as billing_services
from billing.models import BillingCatalogEntry
from ladder import services
from ladder.core import SUBSCRIPTION_AUTO_ID, THRIFTY_AUTO_ID
from ladder.models import LadderSettings, PoolMembership, PoolTransition
from ladder.services import decisions, timeline
from tests.billing.factories import make_catalog_entry
from tests.ladder.factories import NOW, make_candidate, make_connection, make_reading

pytestmark = pytest.mark.django_db


def _world() -> None:
    """A plan login (subscription rung) and a cheap metered key with a 2 USD budget."""
    LadderSettings.objects.filter(pk=1).update(cheap_budget_usd=Decimal("2"), budget_window="month")
    billing_services.upsert_price(
        billing_services.PriceInput("openai", "gpt-4o-mini", Decimal("0.15"), Decimal("0.6"), None),
        actor="test",
    )
    make_connection("plan")
    make_connection("key", provider="openai", auth_type="apikey")
    make_candidate("claude", "claude-sonnet-4-5", connection_id="plan")
    make_candidate("openai", "gpt-4o-mini", connection_id="key")
    services.clear_caches()


def _rows(auto_id: str) -> list[tuple[object, ...]]:
    """The auto id's transitions, oldest first."""
    return [
        (row.at - NOW, row.change, row.connection_id, row.rung, row.reason)
        for row in PoolTransition.objects.filter(auto_id=auto_id).order_by("at", "id")
    ]


def s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def test_a_scripted_sequence_gives_exactly_these_transitions_in_order() -> None:
    _world()
    make_reading("plan", remaining_percent=60.0, now=NOW)
    decisions.record_published(now=NOW)
    # A plain rate limit: a 5 s cooldown (base_cooldown_seconds).
    services.apply_event("plan", kind="rate_limited", now=NOW + s(30))
    decisions.record_published(now=NOW + s(30))
    # The cooldown ends: time alone, recorded by the beat.
    decisions.record_published(now=NOW + s(40))
    # Spend crosses the cheap rung's budget.
    services.record_spend(
        services.SpendInput("r1", "key", "openai", "gpt-4o-mini", Decimal("2.5")),
        now=NOW + s(60),
    )
    decisions.record_published(now=NOW + s(60))
    decisions.record_published(now=NOW + s(70))  # nothing changed: nothing recorded
    # The reading turns stale after max_state_age_seconds (180): time alone again.
    decisions.record_published(now=NOW + s(181))
    # A fresh reading at the exit cutoff, then one above the re-entry floor.
    make_reading("plan", remaining_percent=1.0, now=NOW + s(190))
    decisions.record_published(now=NOW + s(190))
    make_reading("plan", remaining_percent=50.0, now=NOW + s(200))
    decisions.record_published(now=NOW + s(200))

    assert _rows(SUBSCRIPTION_AUTO_ID.auto_id) == [
        (s(0), "entered", "plan", "subscription", None),
        (s(30), "left", "plan", "subscription", "cooling_down"),
        (s(40), "entered", "plan", "subscription", None),
        (s(181), "left", "plan", "subscription", "quota_stale"),
        (s(200), "entered", "plan", "subscription", None),
    ]
    assert _rows(THRIFTY_AUTO_ID.auto_id) == [
        (s(0), "entered", "plan", "subscription", None),
        (s(0), "entered", "key", "cheap", None),
        (s(30), "left", "plan", "subscription", "cooling_down"),
        (s(40), "entered", "plan", "subscription", None),
        (s(60), "left", "key", "cheap", "budget_exhausted"),
        # thrifty fails open on a stale reading: the plan stays until the reading says 1 %
        (s(190), "left", "plan", "subscription", "quota_exhausted"),
        (s(200), "entered", "plan", "subscription", None),
    ]
    budget = PoolTransition.objects.get(auto_id="auto/thrifty", reason="budget_exhausted")
    assert (budget.provider, budget.model, budget.detail) == (
        "openai",
        "gpt-4o-mini",
        "The cheap rung spent 2.50 USD of its 2.00 USD month budget of "
        "2026-11-01 to 2026-11-30 UTC",
    )
    entered = PoolTransition.objects.filter(auto_id="auto/thrifty").order_by("at", "id").first()
    assert entered is not None
    assert entered.detail == "In the pool on the subscription rung"
    stored = PoolMembership.objects.get(auto_id="auto/thrifty")
    assert (stored.version, stored.members) == (6, [["claude", "claude-sonnet-4-5", "plan", 0]])


def test_a_gateways_cache_miss_records_and_an_unchanged_recompute_costs_no_query() -> None:
    _world()
    make_reading("plan", remaining_percent=60.0, now=NOW)
    counters = billing_services.change_counters()
    services.decide_registered(SUBSCRIPTION_AUTO_ID, now=NOW, counters=counters)
    assert _rows("auto/subscription") == [(s(0), "entered", "plan", "subscription", None)]

    # The decision expires (valid_until) and is recomputed: same membership.
    decisions._decisions.clear()
    with CaptureQueriesContext(db_connection) as same_process:
        services.decide_registered(SUBSCRIPTION_AUTO_ID, now=NOW + s(1), counters=counters)
    # Another process (it never saw this membership): one query, nothing written.
    decisions._decisions.clear()
    timeline.clear_known()
    with CaptureQueriesContext(db_connection) as other_process:
        services.decide_registered(SUBSCRIPTION_AUTO_ID, now=NOW + s(2), counters=counters)

    timeline_sql = [q["sql"] for q in same_process.captured_queries if "ladder_pool" in q["sql"]]
    assert timeline_sql == []
    other_sql = [q["sql"] for q in other_process.captured_queries if "ladder_pool" in q["sql"]]
    assert len(other_sql) == 1
    assert other_sql[0].startswith("SELECT")
    assert PoolTransition.objects.count() == 1


def test_a_change_costs_the_stored_membership_a_compare_and_set_and_one_insert() -> None:
    _world()
    make_reading("plan", remaining_percent=60.0, now=NOW)
    decisions.record_published(now=NOW)
    make_reading("plan", remaining_percent=1.0, now=NOW + s(5))
    decision = services.decide_published(now=NOW + s(5))[0]
    assert decision.auto_id == SUBSCRIPTION_AUTO_ID

    with CaptureQueriesContext(db_connection) as captured:
        found = timeline.note_decision(decision)

    # select, savepoint, update (compare-and-set), insert, release
    assert len(captured.captured_queries) == 5
    assert [(t.change, t.reason) for t in found] == [("left", "quota_exhausted")]


def test_a_decision_older_than_the_recorded_one_records_nothing() -> None:
    _world()
    make_reading("plan", remaining_percent=60.0, now=NOW)
    early = services.decide_published(now=NOW)[0]
    make_reading("plan", remaining_percent=1.0, now=NOW + s(5))
    late = services.decide_published(now=NOW + s(5))[0]
    timeline.note_decision(late)
    timeline.clear_known()

    # The early decision has the plan in its pool, the recorded later one does not.
    assert [c.connection_id for c in early.candidates] == ["plan"]
    assert timeline.note_decision(early) == []
    assert _rows("auto/subscription") == []
    stored = PoolMembership.objects.get(auto_id="auto/subscription")
    assert (stored.version, stored.members, stored.computed_at) == (1, [], NOW + s(5))


def test_transitions_are_pruned_with_the_readings_retention() -> None:
    _world()
    make_reading("plan", remaining_percent=60.0, now=NOW)
    decisions.record_published(now=NOW)
    make_reading("plan", remaining_percent=1.0, now=NOW + s(3600))
    decisions.record_published(now=NOW + s(3600))

    assert timeline.prune_transitions(older_than=NOW + s(1)) == 3
    assert _rows("auto/subscription") == [
        (s(3600), "left", "plan", "subscription", "quota_exhausted")
    ]


# Skipped before the fixtures: a transactional test flushes the seeded rows at teardown.
@pytest.mark.skipif(
    db_connection.vendor != "postgresql", reason="concurrent writers need PostgreSQL"
)
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_recorders_record_a_change_once() -> None:
    # Other transactional tests may have flushed the plan entry the data migration seeds.
    if not BillingCatalogEntry.objects.filter(provider="claude", auth_type="oauth").exists():
        make_catalog_entry("claude", "oauth")
    _world()
    make_reading("plan", remaining_percent=60.0, now=NOW)
    decisions.record_published(now=NOW)
    make_reading("plan", remaining_percent=1.0, now=NOW + s(5))
    decision = services.decide_published(now=NOW + s(5))[0]
    barrier = threading.Barrier(2)
    results: list[int] = []

    def record() -> None:
        try:
            barrier.wait()
            timeline.clear_known()
            results.append(len(timeline.note_decision(decision)))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=record) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(results) == [0, 1]
    assert _rows("auto/subscription") == [
        (s(0), "entered", "plan", "subscription", None),
        (s(5), "left", "plan", "subscription", "quota_exhausted"),
    ]
    assert PoolMembership.objects.get(auto_id="auto/subscription").version == 2


def test_the_beat_task_records_and_the_pruning_job_prunes() -> None:
    from django.utils import timezone

    from ladder import tasks

    _world()
    now = timezone.now()
    make_reading("plan", remaining_percent=60.0, now=now, checked_at=now)
    old = PoolTransition.objects.create(
        at=now - timedelta(days=15),
        auto_id="auto/subscription",
        version=0,
        change="left",
        provider="claude",
        model="claude-sonnet-4-5",
        connection_id="plan",
        rung="subscription",
        reason="quota_exhausted",
        detail="long ago",
    )

    tasks.record_pool_timeline_task()
    tasks.prune_readings_task()  # QUOTA_READING_RETENTION_DAYS: 14

    assert not PoolTransition.objects.filter(pk=old.pk).exists()
    assert sorted(PoolTransition.objects.values_list("auto_id", "change", "connection_id")) == [
        ("auto/subscription", "entered", "plan"),
        ("auto/thrifty", "entered", "key"),
        ("auto/thrifty", "entered", "plan"),
    ]


def test_the_beat_records_a_return_no_process_saw_recorded() -> None:
    _world()
    make_reading("plan", remaining_percent=60.0, now=NOW)
    decisions.record_published(now=NOW)  # this process knows the plan is in
    # Another process records the plan leaving (a short cooldown this one never saw).
    services.apply_event("plan", kind="rate_limited", now=NOW + s(10))
    elsewhere = services.decide_published(now=NOW + s(10))[0]
    known = dict(timeline._known)
    timeline.clear_known()
    timeline.note_decision(elsewhere)
    timeline._known.update(known)
    # The cooldown is over: this process's pool equals what it last saw recorded.
    counters = billing_services.change_counters()
    services.decide_registered(SUBSCRIPTION_AUTO_ID, now=NOW + s(20), counters=counters)
    assert len(_rows("auto/subscription")) == 2  # the hot path's shortcut: no query

    decisions.record_published(now=NOW + s(21))

    assert _rows("auto/subscription") == [
        (s(0), "entered", "plan", "subscription", None),
        (s(10), "left", "plan", "subscription", "cooling_down"),
        (s(20), "entered", "plan", "subscription", None),
    ]


def test_with_recording_switched_off_decisions_store_no_membership_and_no_transition(
    settings: Any,
) -> None:
    settings.POOL_TIMELINE_RECORDING = False
    _world()
    make_reading("plan", remaining_percent=60.0, now=NOW)

    decision = decisions.decide_registered(SUBSCRIPTION_AUTO_ID, now=NOW)
    decided_by_the_beat = decisions.record_published(now=NOW)

    assert [c.connection_id for c in decision.candidates] == ["plan"]
    assert decided_by_the_beat == 0
    assert (PoolMembership.objects.count(), PoolTransition.objects.count()) == (0, 0)
