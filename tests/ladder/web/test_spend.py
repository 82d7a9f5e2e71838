"""The spend and savings page (ladder/web/spend.py) and its CSV download, on the
hand-checked ledger of tests/ladder/spend_ledger.py: the table beside the charts, the
charts' text alternatives, the breakdowns, empty states, access and query counts."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client

from ladder.core.spend_series import SpendDay, WindowSeries
from ladder.models import SpendDayTotal
from ladder.web.spend import PAID_SERIES
from ladder.web.spend_chart import daily_bar_chart, nice_ceiling
from omniroute_admin import dashboard
from tests.ladder.factories import NOW, make_reading
from tests.ladder.services.test_spend_history import _grow_ledger
from tests.ladder.spend_ledger import write_ledger
from tests.pages import Element, parse
from tests.worlds import htmx_headers, signed_in

pytestmark = pytest.mark.django_db

URL = "/spend/"
CSV_HEADER = (
    b"occurred_at,request_id,connection_id,provider,model,rung,input_tokens,"
    b"output_tokens,cost_usd,cost_computed,billed_usd,list_price_usd\r\n"
)


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


@pytest.fixture
def viewer(client: Client) -> Client:
    write_ledger()
    return signed_in(client, "victor", "viewer")


def _page(client: Client, url: str = URL) -> Element:
    response = client.get(url)
    assert response.status_code == 200
    return parse(response.content)


def _rows(table: Element) -> list[list[str]]:
    return [
        [cell.text for cell in row.children if isinstance(cell, Element)]
        for body in table.by_tag("tbody")
        for row in body.by_tag("tr")
    ]


def test_the_table_beside_the_charts_gives_every_day_to_the_cent(viewer: Client) -> None:
    rows = _rows(_page(viewer).by_id("spend-days"))

    # This month: a heading row, the 29 days newest first, then its total.
    assert rows[0] == ["This month: 2026-11-01 to 2026-11-30"]
    assert rows[1:4] == [
        ["2026-11-29", "1.25", "0.00", "1.25", "3.00"],
        ["2026-11-28", "0.75", "4.00", "4.75", "0.30"],
        ["2026-11-27", "0.00", "0.00", "0.00", "0.00"],
    ]
    assert rows[29] == ["2026-11-01", "0.00", "0.00", "0.00", "1.50"]
    assert rows[30] == ["Total this month", "2.00", "4.00", "6.00", "4.80"]
    # Last month: all 31 days; September's 100.00 on premium is in neither window.
    assert rows[31] == ["Last month: 2026-10-01 to 2026-10-31"]
    assert rows[32] == ["2026-10-31", "2.00", "0.00", "2.00", "0.00"]
    assert rows[48] == ["2026-10-15", "0.00", "0.00", "0.00", "6.00"]
    assert rows[63] == ["Total last month", "2.00", "0.00", "2.00", "6.00"]
    assert len(rows) == 64


def test_the_headline_budgets_and_savings(viewer: Client) -> None:
    page = _page(viewer)

    assert page.by_id("spend-headline").text == (
        "This month: paid 6.00 USD, saved 4.80 USD. Last month: paid 2.00 USD, saved 6.00 USD."
    )
    assert page.by_id("budget-texts").text.startswith(
        "Budgets per month: cheap: 10.00 USD a month; premium: no budget (never gated)."
    )
    assert [m.attrs["aria-label"] for m in page.by_class("meter")] == [
        "cheap spend 20 % of its budget",
        "premium spend 0 % of its budget",
    ]
    assert page.by_id("previous-spend").text.startswith(
        "Last month: cheap 2.00 USD, premium 0.00 USD"
    )
    assert [e.text for e in page.by_id("savings-totals").by_tag("dd")] == ["4.80 USD", "6.00 USD"]


def test_each_chart_is_an_image_named_by_its_title_and_description(viewer: Client) -> None:
    page = _page(viewer)

    charts = page.by_class("spend-chart")

    assert [c.attrs["aria-labelledby"] for c in charts] == [
        "paid-chart-title paid-chart-desc",
        "saved-chart-title saved-chart-desc",
        "period-chart-title period-chart-desc",
    ]
    assert {c.attrs["role"] for c in charts} == {"img"}
    assert page.by_id("paid-chart-title").text == (
        "Paid spend per UTC day, last month and this month"
    )
    assert page.by_id("paid-chart-desc").text == (
        "Stacked bars, cheap below premium, one per day from 2026-10-01 to 2026-11-29; the "
        "dashed line is the start of this month. This month: cheap 2.00 USD, premium 4.00 "
        "USD. Last month: cheap 2.00 USD, premium 0.00 USD. Budgets: cheap: 10.00 USD a "
        "month; premium: no budget (never gated). Every day's numbers are in the table "
        '"Spend and savings per day" below the charts.'
    )
    assert "This month: 4.80 USD; last month: 6.00 USD." in page.by_id("saved-chart-desc").text
    # A column per day of both windows; each titled with its numbers.
    paid_days = charts[0].by_class("spend-day")
    assert len(paid_days) == 31 + 29
    assert paid_days[-2].by_tag("title")[0].text == "2026-11-28: cheap 0.75 USD, premium 4.00 USD"
    assert [b.attrs["class"] for b in paid_days[-2].by_tag("rect")] == [
        "spend-bar spend-bar-cheap",
        "spend-bar spend-bar-premium",
    ]


def test_the_breakdown_by_connection_and_by_model(viewer: Client) -> None:
    page = _page(viewer)

    breakdown = page.by_id("spend-breakdown")
    connections = _rows(breakdown.by_class("spend-by-connection")[0])
    models = _rows(breakdown.by_class("spend-by-model")[0])

    assert connections == [
        ["plan", "2", "0.00", "4.50", "4.50"],
        ["prem", "1", "4.00", "4.00", "0.00"],
        ["key", "2", "2.00", "2.00", "0.00"],
        ["free-path", "1", "0.00", "0.30", "0.30"],
    ]
    assert models == [
        ["claude/claude-sonnet-4-5", "2", "0.00", "4.50", "4.50"],
        ["openai/gpt-4o", "1", "4.00", "4.00", "0.00"],
        ["openai/gpt-4o-mini", "3", "2.00", "2.30", "0.30"],
    ]
    assert breakdown.by_id("breakdown-total").text == (
        "6 requests from 2026-11-01 to 2026-11-30: billed 6.00 USD, list price 10.80 USD, "
        "saved 4.80 USD. These entries as CSV."
    )


def test_the_previous_window_breakdown_comes_as_a_fragment_for_htmx(viewer: Client) -> None:
    response = viewer.get(URL + "?window=previous", headers=htmx_headers("spend-breakdown"))

    html = response.content.decode()
    assert html.lstrip().startswith('<section id="spend-breakdown"')
    assert "<html" not in html
    fragment = parse(html)
    assert _rows(fragment.by_class("spend-by-connection")[0]) == [
        ["plan", "1", "0.00", "6.00", "6.00"],
        ["key", "1", "2.00", "2.00", "0.00"],
    ]
    assert [a.attrs.get("aria-current") for a in fragment.by_class("tab")] == [
        None,
        None,
        None,
        "true",
        None,
    ]
    assert "HX-Request" in response["Vary"]


def test_an_unknown_window_shows_the_current_one(viewer: Client) -> None:
    page = _page(viewer, URL + "?window=%00nonsense")

    assert page.by_id("breakdown-heading").text == "By connection, model and token, this month"


def test_an_empty_ledger_explains_itself(client: Client) -> None:
    page = _page(signed_in(client, "victor", "viewer"))

    assert page.by_id("spend-empty").text.startswith(
        "No paid spend and no plan savings were recorded last month or this month."
    )
    assert page.by_class("spend-chart") == []
    assert page.by_id("breakdown-empty").text == (
        "No request was recorded this month yet: the first gateway report of this month starts it."
    )


def test_spend_without_savings_says_why_the_savings_chart_is_empty(client: Client) -> None:
    write_ledger()
    SpendDayTotal.objects.filter(rung__in=("subscription", "keyless")).delete()

    page = _page(signed_in(client, "victor", "viewer"))

    assert [c.attrs["aria-labelledby"] for c in page.by_class("spend-chart")] == [
        "paid-chart-title paid-chart-desc",
        "period-chart-title period-chart-desc",
    ]
    assert page.by_id("saved-empty").text.startswith(
        "The plans saved nothing last month or this month"
    )


def test_the_csv_download_of_this_window_is_the_api_export(viewer: Client) -> None:
    response = viewer.get("/spend/export.csv?window=current")

    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == ('attachment; filename="spend-20261129T120000Z.csv"')
    body = b"".join(response.streaming_content)  # type: ignore[attr-defined]
    assert body == CSV_HEADER + (
        b"2026-11-29T09:00:00Z,nov-cheap-2,key,openai,gpt-4o-mini,cheap,10,10,"
        b"1.25000000,false,1.25000000,1.25000000\r\n"
        b"2026-11-29T08:00:00Z,nov-plan-2,plan,claude,claude-sonnet-4-5,subscription,"
        b"1000000,0,3.00000000,true,0.00000000,3.00000000\r\n"
        b"2026-11-28T12:00:00Z,nov-keyless,free-path,openai,gpt-4o-mini,keyless,2000000,0,"
        b"0.30000000,true,0.00000000,0.30000000\r\n"
        b"2026-11-28T11:00:00Z,nov-premium,prem,openai,gpt-4o,premium,10,10,"
        b"4.00000000,false,4.00000000,4.00000000\r\n"
        b"2026-11-28T10:00:00Z,nov-cheap-1,key,openai,gpt-4o-mini,cheap,10,10,"
        b"0.75000000,false,0.75000000,0.75000000\r\n"
        b"2026-11-01T00:00:00Z,nov-plan-1,plan,claude,claude-sonnet-4-5,subscription,"
        b"500000,0,1.50000000,true,0.00000000,1.50000000\r\n"
    )


def test_the_csv_download_of_the_previous_window_and_of_every_entry(viewer: Client) -> None:
    previous = b"".join(viewer.get("/spend/export.csv?window=previous").streaming_content)  # type: ignore[attr-defined]
    everything = b"".join(viewer.get("/spend/export.csv").streaming_content)  # type: ignore[attr-defined]

    assert previous == CSV_HEADER + (
        b"2026-10-31T23:59:59Z,oct-cheap,key,openai,gpt-4o-mini,cheap,10,10,"
        b"2.00000000,false,2.00000000,2.00000000\r\n"
        b"2026-10-15T12:00:00Z,oct-plan,plan,claude,claude-sonnet-4-5,subscription,"
        b"2000000,0,6.00000000,true,0.00000000,6.00000000\r\n"
    )
    lines = everything.split(b"\r\n")
    # the header, the nine entries (the duplicate once), and the empty end
    assert len(lines) == 11
    assert lines[-2].startswith(b"2026-09-30T12:00:00Z,sep-premium,")


def test_signed_out_is_sent_to_sign_in_for_the_page_and_the_csv(client: Client) -> None:
    write_ledger()

    page = client.get(URL)
    download = client.get("/spend/export.csv")

    assert (page.status_code, page["Location"]) == (302, "/accounts/login/?next=/spend/")
    assert (download.status_code, download["Location"]) == (
        302,
        "/accounts/login/?next=/spend/export.csv",
    )


def test_the_nav_links_to_the_page_and_marks_it_current(viewer: Client) -> None:
    page = _page(viewer)

    current = [a for a in page.by_id("main-nav").by_tag("a") if a.attrs.get("aria-current")]

    assert [(a.attrs["href"], a.text) for a in current] == [("/spend/", "Spend")]


@pytest.mark.parametrize("more", [0, 1000])
def test_the_page_runs_the_same_queries_whatever_the_ledger_holds(
    viewer: Client, more: int, django_assert_num_queries: Any
) -> None:
    _grow_ledger(more)
    assert viewer.get(URL).status_code == 200

    # The session and its user (2), the viewer's role, the settings, the day totals, the
    # breakdown's totals, connections, models and tokens, and the plans' windows.
    with django_assert_num_queries(10):
        assert viewer.get(URL).status_code == 200


def test_the_chart_scales_to_a_round_top_and_draws_stacked_bars() -> None:
    previous = WindowSeries(
        date(2026, 11, 28), date(2026, 11, 29), False, (SpendDay(date(2026, 11, 28)),)
    )
    current = WindowSeries(
        date(2026, 11, 29),
        date(2026, 11, 30),
        True,
        (SpendDay(date(2026, 11, 29), Decimal("3"), Decimal("4")),),
    )

    chart = daily_bar_chart(previous, current, PAID_SERIES)

    assert chart is not None
    assert [nice_ceiling(Decimal(v)) for v in ("7", "0.0042", "120", "1")] == [
        Decimal("10"),
        Decimal("0.005"),
        Decimal("200"),
        Decimal("1"),
    ]
    assert chart.y_ticks == [("172.0", "0.00"), ("92.0", "5.00"), ("12.0", "10.00")]
    # Two slots of 652 / 2 = 326 units, a bar 70 % of one (228.2) 15 % in (48.9); 16 units
    # a dollar: the 29th's cheap 3 is 48 high on the axis (172), premium 4 is 64 above it.
    assert [(b.series, b.x, b.y, b.width, b.height) for b in chart.columns[1].bars] == [
        ("cheap", "430.9", "124.0", "228.2", "48.0"),
        ("premium", "430.9", "60.0", "228.2", "64.0"),
    ]
    assert chart.columns[0].bars == []
    assert [t.label for t in chart.x_ticks] == ["2026-11-28", "2026-11-29"]
    assert daily_bar_chart(previous, previous, PAID_SERIES) is None


# --- any period ------------------------------------------------------------------------------


def _ledger_totals(first: date, last: date) -> tuple[Decimal, Decimal, int]:
    """Paid and saved over the UTC days [first, last], summed from the ledger itself."""
    from datetime import UTC, datetime, time, timedelta

    from ladder.models import SpendEntry

    entries = SpendEntry.objects.filter(
        occurred_at__gte=datetime.combine(first, time(), tzinfo=UTC),
        occurred_at__lt=datetime.combine(last + timedelta(days=1), time(), tzinfo=UTC),
    )
    paid = sum((e.billed_usd for e in entries if e.rung in ("cheap", "premium")), Decimal(0))
    saved = sum(
        (e.list_price_usd for e in entries if e.rung in ("subscription", "keyless")), Decimal(0)
    )
    return paid, saved, entries.count()


def test_the_last_7_days_totals_equal_the_ledgers(viewer: Client) -> None:
    page = _page(viewer, URL + "?period=7d")

    paid, saved, requests = _ledger_totals(date(2026, 11, 23), date(2026, 11, 29))
    assert (paid, saved, requests) == (Decimal("6.00"), Decimal("3.30"), 5)
    assert page.by_id("period-paid").text == "6.00"
    assert page.by_id("period-saved").text == "3.30"
    assert page.by_id("period-totals").text.startswith(
        "The last 7 days, 2026-11-23 to 2026-11-29: paid 6.00 USD, saved 3.30 USD."
    )
    assert page.by_id("breakdown-total").text.startswith(
        "5 requests from 2026-11-23 to 2026-11-29: billed 6.00 USD"
    )
    # The chart spans the period's days, none beyond today.
    chart = page.by_class("spend-chart")[-1]
    assert [d.by_tag("title")[0].text[:10] for d in chart.by_class("spend-day")] == [
        f"2026-11-{day}" for day in range(23, 30)
    ]
    assert [a.text for a in page.by_class("tab") if a.attrs.get("aria-current")] == [
        "The last 7 days"
    ]


@pytest.mark.parametrize(
    ("query", "first", "last", "paid", "saved"),
    [
        ("period=today", date(2026, 11, 29), date(2026, 11, 29), "1.25", "3.00"),
        ("period=mtd", date(2026, 11, 1), date(2026, 11, 29), "6.00", "4.80"),
        ("period=last", date(2026, 10, 1), date(2026, 10, 31), "2.00", "6.00"),
        ("from=2026-10-31&to=2026-11-01", date(2026, 10, 31), date(2026, 11, 1), "2.00", "1.50"),
    ],
    ids=["today", "month-to-date", "last-window", "custom-range"],
)
def test_each_period_totals_its_own_days(
    viewer: Client, query: str, first: date, last: date, paid: str, saved: str
) -> None:
    page = _page(viewer, f"{URL}?{query}")

    ledger_paid, ledger_saved, _ = _ledger_totals(first, last)
    assert (ledger_paid, ledger_saved) == (Decimal(paid), Decimal(saved))
    assert (page.by_id("period-paid").text, page.by_id("period-saved").text) == (paid, saved)
    assert f"{first:%Y-%m-%d} to {last:%Y-%m-%d}" in page.by_id("period-totals").text


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ("from=2026-11-05&to=2026-11-01", "The period's last day is before its first day."),
        ("from=2026-11-05", "A custom period needs both days as YYYY-MM-DD."),
        ("from=yesterday&to=2026-11-01", "A custom period needs both days as YYYY-MM-DD."),
        ("from=2024-01-01&to=2026-11-01", "A period is at most 400 days."),
    ],
)
def test_a_bad_custom_range_says_why_and_shows_this_window(
    viewer: Client, query: str, why: str
) -> None:
    page = _page(viewer, f"{URL}?{query}")

    assert page.by_id("period-refused").text == f"Not shown: {why} Showing this month."
    assert page.by_id("breakdown-heading").text == "By connection, model and token, this month"


def test_money_reads_to_the_cent_and_is_exact_on_hover(viewer: Client) -> None:
    from ladder import services

    services.record_spend(
        services.SpendInput(
            request_id="tiny",
            connection_id="key",
            provider="openai",
            model="gpt-4o-mini",
            cost_usd=Decimal("0.01274"),
            input_tokens=10,
            output_tokens=10,
            occurred_at=NOW,
        ),
        now=NOW,
    )

    page = _page(viewer, URL + "?period=today")

    paid = page.by_id("period-paid").by_class("money")[0]
    assert (paid.text, paid.attrs["title"]) == ("1.26", "1.26274 USD exactly")


def test_the_csv_of_a_period_has_its_entries_only(viewer: Client) -> None:
    response = viewer.get("/spend/export.csv?from=2026-11-28&to=2026-11-28")

    lines = b"".join(response.streaming_content).splitlines()  # type: ignore[attr-defined]
    assert [line.split(b",")[1] for line in lines[1:]] == [
        b"nov-keyless",
        b"nov-premium",
        b"nov-cheap-1",
    ]


def test_the_breakdown_by_token_names_each_reporter(viewer: Client) -> None:
    # The hand-written ledger was reported through the service with no token.
    rows = _rows(_page(viewer).by_class("spend-by-token")[0])

    assert rows == [["no token recorded", "6", "6.00", "10.80", "4.80"]]


def test_plan_utilisation_per_plan_connection(viewer: Client) -> None:
    day = NOW.replace(hour=0)
    for hours, remaining, reset in ((1, 80.0, 5), (4, 30.0, 5), (6, 20.0, 10), (9, 0.0, 10)):
        at = day + timedelta(hours=hours)
        make_reading(
            "plan",
            now=at,
            checked_at=at,
            remaining_percent=remaining,
            reset_at=day + timedelta(hours=reset),
        )

    page = _page(viewer, URL + "?period=today")

    assert _rows(page.by_id("plan-use")) == [
        ["plan", "2", "85.0", "15.0", "0.3", "2026-11-29 10:00 UTC, 0.0 % left"]
    ]


def test_no_plan_window_reset_says_so(viewer: Client) -> None:
    page = _page(viewer, URL + "?period=today")

    assert page.by_id("plan-use-empty").text == (
        "No plan's quota window reset today with a reading before it: utilisation shows "
        "once a read plan connection's window resets."
    )
