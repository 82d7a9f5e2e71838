"""Spend on the hot path: writes on the cached snapshot in a constant number of queries,
running totals per UTC day and rung kept with the ledger, and the change version moved
only when an entry makes a budgeted rung cross its budget in the current window."""

from __future__ import annotations

import threading
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import connection as db_connection
from django.db import connections
from django.db.models import Sum
from django.db.models.functions import TruncDate
from django.test import override_settings

from billing import services as billing_services
from billing.models import ChangeCounter, ModelPrice
from ladder import services
from ladder.models import BudgetCrossing, LadderSettings, SpendDayTotal, SpendEntry
from tests.ladder.factories import NOW, make_connection

pytestmark = pytest.mark.django_db

# NOW is 2026-11-29 12:00 UTC, a Sunday: the week began on 2026-11-23, the month on
# 2026-11-01.


def _budgets(cheap: str | None = None, premium: str | None = None, window: str = "month") -> None:
    services.get_settings_row()  # a flushed database (transactional tests) lost it
    LadderSettings.objects.filter(pk=1).update(
        cheap_budget_usd=None if cheap is None else Decimal(cheap),
        premium_budget_usd=None if premium is None else Decimal(premium),
        budget_window=window,
    )
    billing_services.bump(ChangeCounter.CONFIG)


def _prices(count: int) -> None:
    """`count` price rows: gpt-4o-mini (cheap), gpt-4o (premium) and filler models."""
    ModelPrice.objects.bulk_create(
        [
            ModelPrice(
                provider="openai",
                model="gpt-4o-mini",
                input_usd_per_mtok=Decimal("0.15"),
                output_usd_per_mtok=Decimal("0.6"),
            ),
            ModelPrice(
                provider="openai",
                model="gpt-4o",
                input_usd_per_mtok=Decimal("2.5"),
                output_usd_per_mtok=Decimal("10"),
            ),
            *(
                ModelPrice(
                    provider="filler",
                    model=f"model-{index}",
                    input_usd_per_mtok=Decimal(1),
                    output_usd_per_mtok=Decimal(2),
                )
                for index in range(count - 2)
            ),
        ]
    )
    billing_services.bump(ChangeCounter.CONFIG)


def _state() -> int:
    return billing_services.change_counters()[1]


def _spend(
    request_id: str,
    cost: str | None,
    model: str = "gpt-4o-mini",
    *,
    occurred_at: datetime | None = None,
    connection_id: str = "openai-key",
    now: datetime = NOW,
) -> tuple[SpendEntry, bool]:
    return services.record_spend(
        services.SpendInput(
            request_id,
            connection_id,
            "openai",
            model,
            None if cost is None else Decimal(cost),
            1_000_000,
            0,
            occurred_at=occurred_at,
        ),
        now=now,
    )


def _input(request_id: str, cost: str | None) -> services.SpendInput:
    return services.SpendInput(
        request_id,
        "openai-key",
        "openai",
        "gpt-4o-mini",
        None if cost is None else Decimal(cost),
        1_000_000,
        0,
    )


def _totals() -> list[tuple[date, str, Decimal]]:
    """Each (day, rung) total, its shards summed."""
    return list(
        SpendDayTotal.objects.values("day", "rung")
        .annotate(total=Sum("spent_usd"))
        .order_by("day", "rung")
        .values_list("day", "rung", "total")
    )


def _ledger_sums() -> list[tuple[date, str, Decimal]]:
    rows = (
        SpendEntry.objects.annotate(day=TruncDate("occurred_at", tzinfo=UTC))
        .order_by()
        .values("day", "rung")
        .annotate(total=Sum("cost_usd"))
        .order_by("day", "rung")
    )
    return [(row["day"], row["rung"], row["total"]) for row in rows]


# --- queries per write ----------------------------------------------------------------------


ON_POSTGRESQL = db_connection.vendor == "postgresql"


@pytest.mark.parametrize("price_rows", [10, 3000])
@pytest.mark.parametrize("cost", [None, "0.01"], ids=["computed-cost", "reported-cost"])
def test_a_spend_write_costs_the_same_few_queries_whatever_the_price_catalog_holds(
    price_rows: int, cost: str | None, django_assert_num_queries: Any
) -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    _prices(price_rows)
    _budgets(cheap="100")
    _spend("warm", "0.01")  # loads the snapshot and creates the day's total

    # PostgreSQL: counters, connection, the one statement (ledger row and day total),
    # then the window's sum with the config counter. SQLite: counters, connection,
    # savepoint, insert, lock the day's total, add, release, window sum, config counter.
    with django_assert_num_queries(4 if ON_POSTGRESQL else 9):
        _, created = _spend("hot", cost)

    assert created is True


@pytest.mark.parametrize("price_rows", [10, 3000])
def test_with_the_tokens_counters_a_spend_write_is_its_statement_and_the_window_sum(
    price_rows: int, django_assert_num_queries: Any
) -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    _prices(price_rows)
    _budgets(cheap="100")
    counters = billing_services.change_counters()  # as the API reads them with the token
    services.record_spend(_input("warm", "0.01"), now=NOW, counters=counters)

    # (SQLite reads the config counter apart from the window's sum.)
    with django_assert_num_queries(2 if ON_POSTGRESQL else 7):
        _, created = services.record_spend(_input("hot", None), now=NOW, counters=counters)

    assert created is True


@pytest.mark.parametrize("price_rows", [10, 3000])
def test_a_spend_write_on_a_rung_without_budget_skips_the_window_sum(
    price_rows: int, django_assert_num_queries: Any
) -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    _prices(price_rows)
    _spend("warm", "0.01")

    # PostgreSQL: counters, connection, the statement, the config counter once it
    # committed (a budget set meanwhile: spend_totals.must_move_after_spend); SQLite:
    # counters, connection, savepoint, insert, lock, add, release, config counter.
    with django_assert_num_queries(4 if ON_POSTGRESQL else 8):
        _spend("hot", None)


def test_a_seen_request_id_is_answered_as_stored_and_writes_nothing(
    django_assert_num_queries: Any,
) -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    _prices(10)
    _spend("r1", "1")
    totals = _totals()

    # PostgreSQL: counters, connection, the statement (which inserts nothing), the
    # stored entry. SQLite: counters, connection, savepoint, the refused insert,
    # rollback to the savepoint, release, the stored entry.
    with django_assert_num_queries(4 if ON_POSTGRESQL else 7):
        entry, created = _spend("r1", "9")

    assert (entry.cost_usd, created, _totals()) == (Decimal("1.00000000"), False, totals)


def test_a_seen_request_id_is_answered_even_when_its_report_would_now_be_refused() -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    _prices(10)
    _spend("r1", "1", occurred_at=NOW - timedelta(days=1))

    # A day later than the retention period allows, the retry of the same report.
    entry, created = _spend("r1", "1", occurred_at=NOW - timedelta(days=400))

    assert (entry.request_id, entry.cost_usd, created) == ("r1", Decimal("1.00000000"), False)


def test_the_settings_of_the_snapshot_decide_the_date_check_with_no_reload() -> None:
    _budgets(window="month")
    services.current_snapshot(billing_services.change_counters()[0])
    # A change the counters do not announce is not seen: the snapshot is what counts.
    LadderSettings.objects.filter(pk=1).update(budget_window="day")

    # 28 days back: beyond the 14 days' retention but inside the snapshot's month.
    entry, created = _spend("old", "1", occurred_at=NOW - timedelta(days=28))

    assert (created, entry.occurred_at) == (True, NOW - timedelta(days=28))


# --- running totals -------------------------------------------------------------------------


@override_settings(QUOTA_READING_RETENTION_DAYS=60)
def test_the_totals_hold_the_ledger_per_utc_day_and_rung() -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    make_connection("claude-max-1")
    _prices(10)
    _spend("a", "1.5")
    _spend("b", "0.25", occurred_at=datetime(2026, 11, 29, 0, 0, tzinfo=UTC))
    _spend("c", "2", "gpt-4o", occurred_at=datetime(2026, 11, 28, 23, 59, 59, tzinfo=UTC))
    _spend("d", None)  # 1M input tokens of gpt-4o-mini: 0.15
    _spend("e", "3", connection_id="claude-max-1")
    _spend("a", "100")  # seen before: not counted

    assert _totals() == [
        (date(2026, 11, 28), "premium", Decimal("2.00000000")),
        (date(2026, 11, 29), "cheap", Decimal("1.90000000")),
        (date(2026, 11, 29), "subscription", Decimal("3.00000000")),
    ]
    assert _totals() == _ledger_sums()


@override_settings(QUOTA_READING_RETENTION_DAYS=60)
def test_window_spend_sums_the_days_of_the_calendar_window() -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    _prices(10)
    _spend("october", "5", occurred_at=datetime(2026, 10, 31, 23, 59, tzinfo=UTC))
    _spend("first", "1", occurred_at=datetime(2026, 11, 1, tzinfo=UTC))
    _spend("monday", "2", occurred_at=datetime(2026, 11, 23, 8, tzinfo=UTC))
    _spend("today", "4")

    by_window = {}
    for window in ("day", "week", "month"):
        _budgets(window=window)
        config = services.load_config()
        by_window[window] = services.spend_in_window(config, NOW)[services.PAID_RUNGS[0]]

    assert {w: s.spent_usd for w, s in by_window.items()} == {
        "day": Decimal("4.00000000"),
        "week": Decimal("6.00000000"),
        "month": Decimal("7.00000000"),
    }
    assert by_window["month"].window_end == datetime(2026, 12, 1, tzinfo=UTC)


def test_rebuilding_the_totals_recomputes_them_from_the_ledger() -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    _prices(10)
    _spend("a", "1")
    SpendDayTotal.objects.update(spent_usd=Decimal("99"))
    SpendEntry.objects.create(
        request_id="bulk",
        connection_id="k",
        provider="openai",
        model="gpt-4o",
        cost_usd=Decimal("2"),
        rung="premium",
        occurred_at=NOW,
    )

    written = services.rebuild_spend_totals()

    assert written == 2
    assert (
        _totals()
        == _ledger_sums()
        == [
            (date(2026, 11, 29), "cheap", Decimal("1.00000000")),
            (date(2026, 11, 29), "premium", Decimal("2.00000000")),
        ]
    )


def test_a_refused_spend_stores_no_total() -> None:
    with pytest.raises(ValidationError):
        _spend("r1", "1", occurred_at=NOW + timedelta(minutes=5))

    assert (list(SpendEntry.objects.all()), _totals()) == ([], [])


# --- when spend moves the change version ------------------------------------------------------


def test_spend_under_a_budget_does_not_move_the_version_and_crossing_it_does_once() -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    _prices(10)
    _budgets(cheap="1")
    before = _state()

    _spend("a", "0.6")
    after_under = _state()
    _spend("b", "0.4")  # 1.0: reaches the budget
    after_crossing = _state()
    _spend("c", "0.5")  # already spent
    after_over = _state()

    assert (after_under, after_crossing, after_over) == (before, before + 1, before + 1)


def test_a_single_entry_past_the_whole_budget_crosses_it() -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    _prices(10)
    _budgets(premium="2")
    before = _state()

    _spend("a", "5", "gpt-4o")

    assert _state() == before + 1


@pytest.mark.parametrize(
    ("cheap", "premium"),
    [(None, None), ("0", None), (None, "1")],
    ids=["no-budget", "budget-0-disables", "other-rung-budgeted"],
)
def test_spend_on_a_cheap_rung_without_a_usable_budget_never_moves_the_version(
    cheap: str | None, premium: str | None
) -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    _prices(10)
    _budgets(cheap=cheap, premium=premium)
    before = _state()

    for n in range(3):
        _spend(f"r{n}", "50")

    assert _state() == before


def test_spend_on_a_plan_included_rung_never_moves_the_version() -> None:
    make_connection("claude-max-1")
    make_connection("free-1", provider="pollinations", auth_type="none")
    _budgets(cheap="1", premium="1")
    before = _state()

    entry, _ = _spend("plan", "50", connection_id="claude-max-1")
    _spend("free", "50", connection_id="free-1")

    assert entry.rung == "subscription"
    assert _state() == before


@override_settings(QUOTA_READING_RETENTION_DAYS=60)
def test_spend_outside_the_current_window_never_moves_the_version() -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    _prices(10)
    _budgets(cheap="1", window="week")
    before = _state()

    # last week (Sunday 22 November) and, 30 s before Monday's midnight, next week.
    _spend("last-week", "5", occurred_at=datetime(2026, 11, 22, 23, 0, tzinfo=UTC))
    _spend(
        "next-week",
        "5",
        occurred_at=datetime(2026, 11, 30, 0, 0, 10, tzinfo=UTC),
        now=datetime(2026, 11, 29, 23, 59, 40, tzinfo=UTC),
    )

    assert _state() == before
    assert services.spend_summary(now=NOW).rungs["cheap"].spent_usd == Decimal(0)


@override_settings(QUOTA_READING_RETENTION_DAYS=60)
def test_spend_dated_earlier_in_the_window_counts_towards_the_crossing() -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    _prices(10)
    _budgets(cheap="3", window="month")
    _spend("early", "2", occurred_at=datetime(2026, 11, 2, tzinfo=UTC))
    before = _state()

    _spend("late", "1")

    assert _state() == before + 1


# --- concurrency (PostgreSQL) -----------------------------------------------------------------


# Skipped before the fixtures: a transactional test flushes the seeded rows at teardown.
@pytest.mark.skipif(db_connection.vendor != "postgresql", reason="the race needs PostgreSQL")
@pytest.mark.django_db(transaction=True)
def test_concurrent_writes_keep_the_totals_equal_to_the_ledger_and_cross_once() -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    _prices(10)
    _budgets(cheap="10", window="month")
    before = _state()
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def writer(worker: int) -> None:
        try:
            start.wait(timeout=10)
            for n in range(25):
                # Alternate today and earlier days of the window; reports repeat ids.
                day = NOW - timedelta(days=(worker + n) % 3)
                _spend(f"r{(worker * 25 + n) % 150}", "0.1", occurred_at=day)
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert SpendEntry.objects.count() == 150
    # (the window's first day holds a zero total: the lock of the window)
    assert [t for t in _totals() if t[2]] == _ledger_sums()
    assert sum(total for _, _, total in _totals()) == Decimal("15.00000000")
    # 150 entries of 0.10 pass the 10 USD budget once: exactly one writer saw it.
    assert _state() == before + 1


@override_settings(QUOTA_READING_RETENTION_DAYS=60)
def test_the_migration_backfills_the_totals_from_the_ledger() -> None:
    import importlib

    from django.apps import apps

    migration = importlib.import_module("ladder.migrations.0008_spend_day_totals")
    make_connection("openai-key", provider="openai", auth_type="apikey")
    _prices(10)
    _spend("a", "1.25")
    _spend("b", "0.5", "gpt-4o", occurred_at=datetime(2026, 11, 28, 23, 59, tzinfo=UTC))
    _spend("c", "2", occurred_at=datetime(2026, 11, 29, 0, 0, tzinfo=UTC))
    SpendDayTotal.objects.all().delete()  # the ledger as it stood before 0008

    migration.backfill_totals(apps, None)

    assert (
        _totals()
        == _ledger_sums()
        == [
            (date(2026, 11, 28), "premium", Decimal("0.50000000")),
            (date(2026, 11, 29), "cheap", Decimal("3.25000000")),
        ]
    )


@pytest.mark.skipif(db_connection.vendor != "postgresql", reason="the race needs PostgreSQL")
@pytest.mark.django_db(transaction=True)
def test_concurrent_batches_and_single_writes_keep_the_totals_and_cross_once() -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    _prices(10)
    _budgets(cheap="20", window="month")
    before = _state()
    start = threading.Barrier(6)
    errors: list[BaseException] = []

    def inputs(worker: int, n: int) -> list[services.SpendInput]:
        # Overlapping request ids across workers, on three days of the window.
        return [
            services.SpendInput(
                f"r{(worker * 7 + n * 50 + k) % 400}",
                "openai-key",
                "openai",
                "gpt-4o-mini",
                Decimal("0.1"),
                occurred_at=NOW - timedelta(days=k % 3),
            )
            for k in range(50)
        ]

    def batch_writer(worker: int) -> None:
        try:
            start.wait(timeout=10)
            for n in range(8):
                services.record_spend_batch(inputs(worker, n), now=NOW)
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    def single_writer(worker: int) -> None:
        try:
            start.wait(timeout=10)
            for n in range(40):
                _spend(f"r{(worker * 13 + n) % 400}", "0.1", occurred_at=NOW)
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=batch_writer, args=(w,)) for w in range(4)]
    threads += [threading.Thread(target=single_writer, args=(w,)) for w in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert errors == []
    count = SpendEntry.objects.count()
    assert [t for t in _totals() if t[2]] == _ledger_sums()
    assert sum(total for _, _, total in _totals()) == Decimal("0.1") * count
    # More than 200 entries of 0.10 pass the 20 USD budget once.
    assert count > 200
    assert _state() == before + 1


def test_a_crossing_is_recorded_once_per_window_and_budget_and_pruned_with_its_window() -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    _prices(10)
    _budgets(cheap="1")
    _spend("a", "1")  # reaches 1 USD
    _spend("b", "1")
    _budgets(cheap="3")  # raised: crossed anew at 3 USD
    _spend("c", "1")
    stored = list(BudgetCrossing.objects.values_list("rung", "window_start", "budget_usd"))

    pruned_early = services.prune_budget_crossings(older_than=datetime(2026, 11, 1, tzinfo=UTC))
    pruned = services.prune_budget_crossings(older_than=datetime(2026, 11, 2, tzinfo=UTC))

    month = datetime(2026, 11, 1, tzinfo=UTC)
    assert stored == [("cheap", month, Decimal("1.000000")), ("cheap", month, Decimal("3.000000"))]
    assert (pruned_early, pruned, BudgetCrossing.objects.count()) == (0, 2, 0)
