"""The spend page's reads (ladder/services/spend_history.py) on the hand-checked ledger of
tests/ladder/spend_ledger.py: the series per day and rung over both windows, the
plans' savings, the breakdowns by connection and by model, and query counts that do not
grow with the ledger."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from ladder import services
from ladder.core.spend_series import WindowSeries
from ladder.models import SpendEntry
from ladder.services import spend_history
from tests.ladder.factories import NOW
from tests.ladder.spend_ledger import write_ledger

pytestmark = pytest.mark.django_db


@pytest.fixture
def ledger() -> None:
    write_ledger()


def _spend_days(series: WindowSeries) -> dict[str, tuple[str, str, str]]:
    """The days with anything on them: day -> (cheap, premium, saved)."""
    return {
        f"{d.day:%Y-%m-%d}": (_text(d.cheap_usd), _text(d.premium_usd), _text(d.saved_usd))
        for d in series.days
        if d.paid_usd or d.saved_usd
    }


def _text(amount: Decimal) -> str:
    return str(amount.normalize())


def _row(row: services.BreakdownRow) -> tuple[str, int, str, str, str]:
    return (
        row.key,
        row.requests,
        _text(row.billed_usd),
        _text(row.list_price_usd),
        _text(row.saved_usd),
    )


def test_the_series_has_each_day_of_both_windows_with_exact_amounts(ledger: None) -> None:
    report = services.spend_report(now=NOW)

    # November 1 to today (the 29th); all of October; September nowhere.
    assert (report.current.days[0].day.isoformat(), len(report.current.days)) == (
        "2026-11-01",
        29,
    )
    assert (report.previous.days[0].day.isoformat(), len(report.previous.days)) == (
        "2026-10-01",
        31,
    )
    assert _spend_days(report.current) == {
        "2026-11-01": ("0", "0", "1.5"),  # the plan at the window's first instant
        "2026-11-28": ("0.75", "4", "0.3"),  # cheap, premium, keyless listed 0.30
        "2026-11-29": ("1.25", "0", "3"),  # the duplicate's 9.99 is not counted
    }
    assert _spend_days(report.previous) == {
        "2026-10-15": ("0", "0", "6"),
        "2026-10-31": ("2", "0", "0"),  # one second before November
    }


def test_the_window_totals_and_the_plans_savings(ledger: None) -> None:
    report = services.spend_report(now=NOW)

    assert (report.current.cheap_usd, report.current.premium_usd) == (Decimal(2), Decimal(4))
    assert (report.current.paid_usd, report.current.saved_usd) == (Decimal(6), Decimal("4.8"))
    assert (report.previous.paid_usd, report.previous.saved_usd) == (Decimal(2), Decimal(6))
    # The budgets against the current window: the overview's numbers exactly.
    assert {
        k: (v.spent_usd, v.budget_usd, v.is_exhausted) for k, v in report.summary.rungs.items()
    } == {
        "cheap": (Decimal(2), Decimal(10), False),
        "premium": (Decimal(4), None, False),
    }
    overview = services.spend_summary(now=NOW)
    assert report.summary == overview
    assert report.budgets == {"cheap": Decimal(10), "premium": None}
    assert report.has_history


def test_the_current_window_by_connection_and_by_model(ledger: None) -> None:
    breakdown = services.spend_report(now=NOW).breakdown

    assert (breakdown.window, breakdown.start, breakdown.end) == (
        "current",
        datetime(2026, 11, 1, tzinfo=UTC),
        datetime(2026, 12, 1, tzinfo=UTC),
    )
    # key, requests, billed, list price, saved; the largest list price first
    assert [_row(r) for r in breakdown.by_connection] == [
        ("plan", 2, "0", "4.5", "4.5"),  # 1.50 + 3.00 listed, nothing billed
        ("prem", 1, "4", "4", "0"),
        ("key", 2, "2", "2", "0"),  # 0.75 + 1.25; the duplicate once
        ("free-path", 1, "0", "0.3", "0.3"),
    ]
    assert [_row(r) for r in breakdown.by_model] == [
        ("claude/claude-sonnet-4-5", 2, "0", "4.5", "4.5"),
        ("openai/gpt-4o", 1, "4", "4", "0"),
        ("openai/gpt-4o-mini", 3, "2", "2.3", "0.3"),  # key's 2.00 and keyless's 0.30
    ]
    assert _row(breakdown.total) == ("total", 6, "6", "10.8", "4.8")  # 4.5 + 4 + 2 + 0.3 listed
    assert (breakdown.are_connections_cut, breakdown.are_models_cut) == (False, False)


def test_the_previous_window_breakdown_leaves_september_out(ledger: None) -> None:
    breakdown = services.spend_report(now=NOW, window="previous").breakdown

    assert [_row(r) for r in breakdown.by_connection] == [
        ("plan", 1, "0", "6", "6"),
        ("key", 1, "2", "2", "0"),
    ]
    assert [_row(r) for r in breakdown.by_model] == [
        ("claude/claude-sonnet-4-5", 1, "0", "6", "6"),
        ("openai/gpt-4o-mini", 1, "2", "2", "0"),
    ]
    assert _row(breakdown.total) == ("total", 2, "2", "8", "6")
    assert SpendEntry.objects.filter(request_id="sep-premium").exists()


def test_a_breakdown_lists_the_largest_groups_and_says_it_is_cut(
    ledger: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spend_history, "BREAKDOWN_ROWS", 2)

    breakdown = services.spend_report(now=NOW).breakdown

    assert [r.key for r in breakdown.by_connection] == ["plan", "prem"]
    assert [r.key for r in breakdown.by_model] == ["claude/claude-sonnet-4-5", "openai/gpt-4o"]
    assert (breakdown.are_connections_cut, breakdown.are_models_cut) == (True, True)
    assert breakdown.total.requests == 6  # the totals still count every entry


def test_an_empty_ledger_has_zero_days_and_no_history() -> None:
    report = services.spend_report(now=NOW)

    assert (len(report.current.days), len(report.previous.days)) == (29, 31)
    assert not report.has_history
    assert (report.breakdown.by_connection, report.breakdown.by_model) == ([], [])
    assert _row(report.breakdown.total) == ("total", 0, "0", "0", "0")


def test_window_filters_are_the_window_bounds(ledger: None) -> None:
    current = services.window_filters("current", now=NOW)
    previous = services.window_filters("previous", now=NOW)

    assert (current.since, current.until) == (
        datetime(2026, 11, 1, tzinfo=UTC),
        datetime(2026, 12, 1, tzinfo=UTC),
    )
    assert (previous.since, previous.until) == (
        datetime(2026, 10, 1, tzinfo=UTC),
        datetime(2026, 11, 1, tzinfo=UTC),
    )


def _grow_ledger(count: int) -> None:
    """`count` more entries over both windows (bulk, then the totals rebuilt)."""
    SpendEntry.objects.bulk_create(
        SpendEntry(
            request_id=f"bulk-{index}",
            connection_id=f"bulk-{index % 7}",
            provider="openai",
            model=f"model-{index % 5}",
            cost_usd=Decimal("0.01"),
            billed_usd=Decimal("0.01"),
            list_price_usd=Decimal("0.01"),
            rung="premium",
            occurred_at=NOW - timedelta(hours=index),
        )
        for index in range(count)
    )
    services.rebuild_spend_totals()


# 1,000 more entries an hour apart back from NOW: those of the last 684 hours and the one
# at 2026-11-01 00:00 exactly (index 684) are in the current window: 685.
@pytest.mark.parametrize(("more", "requests"), [(0, 6), (1000, 6 + 685)])
def test_the_report_runs_seven_queries_whatever_the_ledger_holds(
    ledger: None, more: int, requests: int, django_assert_num_queries: Any
) -> None:
    _grow_ledger(more)

    # the settings, the day totals, the breakdown's totals, connections, models and
    # tokens, and the plans' windows
    with django_assert_num_queries(7):
        report = services.spend_report(now=NOW)

    assert report.breakdown.total.requests == requests
