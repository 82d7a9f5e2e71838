"""The spend and savings page: what the paid rungs cost per UTC day and what the plans
saved, over the current and the previous budget window (two bar charts and the table of
their numbers), the budgets, a window's breakdown by connection and by model, and the
ledger's CSV download for a signed-in viewer (the API's export needs a token)."""

from __future__ import annotations

from dataclasses import dataclass

from django.http import StreamingHttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET

from ladder import services
from ladder.core.prose import money_text
from ladder.core.spend_series import PAID, SpendDay, WindowSeries
from ladder.web.presenters import budget_lines
from ladder.web.spend_chart import Series, daily_bar_chart
from omniroute_admin import dashboard
from omniroute_admin.dashboard import HtmxHttpRequest, render, viewer_required

PAID_SERIES: tuple[Series, ...] = (
    ("cheap", "cheap", lambda day: day.cheap_usd),
    ("premium", "premium", lambda day: day.premium_usd),
)
SAVED_SERIES: tuple[Series, ...] = (("saved", "saved", lambda day: day.saved_usd),)
# What the page calls the two windows of each budget window.
WINDOW_NAMES = {
    "day": ("today", "yesterday"),
    "week": ("this week", "last week"),
    "month": ("this month", "last month"),
}


@dataclass(frozen=True, slots=True)
class DayLine:
    """A row of the table beside the charts, money to the cent."""

    day: str
    cheap: str
    premium: str
    paid: str
    saved: str


def _line(day: str, spend: SpendDay | WindowSeries) -> DayLine:
    return DayLine(
        day,
        money_text(spend.cheap_usd),
        money_text(spend.premium_usd),
        money_text(spend.paid_usd),
        money_text(spend.saved_usd),
    )


@dataclass(frozen=True, slots=True)
class WindowView:
    """One window as the page names it: its days, newest first, and its totals."""

    name: str
    series: WindowSeries
    lines: list[DayLine]
    total: DayLine


def _window_view(name: str, series: WindowSeries) -> WindowView:
    lines = [_line(f"{d.day:%Y-%m-%d}", d) for d in reversed(series.days)]
    return WindowView(name, series, lines, _line("total", series))


@dataclass(frozen=True, slots=True)
class BreakdownLine:
    key: str
    requests: int
    billed: str
    listed: str
    saved: str


def _breakdown_lines(rows: list[services.BreakdownRow]) -> list[BreakdownLine]:
    return [
        BreakdownLine(
            r.key,
            r.requests,
            money_text(r.billed_usd),
            money_text(r.list_price_usd),
            money_text(r.saved_usd),
        )
        for r in rows
    ]


def budget_texts(report: services.SpendReport) -> list[str]:
    """Each paid rung's budget in words ("cheap: 50.00 USD a month")."""
    per = report.config.budget_window.value
    texts = []
    for rung in PAID:
        budget = report.budgets[rung.label]
        if budget is None:
            texts.append(f"{rung.label}: no budget (never gated)")
        elif budget == 0:
            texts.append(f"{rung.label}: 0 USD (the rung is disabled)")
        else:
            texts.append(f"{rung.label}: {money_text(budget)} USD a {per}")
    return texts


@require_GET
@viewer_required
def spend_page(request: HtmxHttpRequest) -> TemplateResponse:
    """Spend per day per paid rung and the plans' savings over two budget windows, the
    budgets, and a window's breakdown (`?window=previous`: the previous window's)."""
    now = dashboard.current_time()
    window: services.WindowName = (
        "previous" if request.GET.get("window") == "previous" else "current"
    )
    report = services.spend_report(now=now, window=window)
    this_name, last_name = WINDOW_NAMES[report.config.budget_window.value]
    current = _window_view(this_name, report.current)
    previous = _window_view(last_name, report.previous)
    spend_url = reverse("ladder:spend")
    csv_url = reverse("ladder:spend-csv")
    breakdown = report.breakdown
    context = {
        "now": now,
        "report": report,
        "current": current,
        "previous": previous,
        "windows": [current, previous],
        "paid_chart": daily_bar_chart(report.previous, report.current, PAID_SERIES),
        "saved_chart": daily_bar_chart(report.previous, report.current, SAVED_SERIES),
        "budgets": budget_lines(report.summary),
        "budget_texts": budget_texts(report),
        "previous_spend": [(r.label, money_text(report.previous.spent_on(r))) for r in PAID],
        "breakdown": breakdown,
        "shown": previous if window == "previous" else current,
        "breakdown_total": _breakdown_lines([breakdown.total])[0],
        "by_connection": _breakdown_lines(breakdown.by_connection),
        "by_model": _breakdown_lines(breakdown.by_model),
        "breakdown_rows": services.BREAKDOWN_ROWS,
        "spend_url": spend_url,
        "window_tabs": [
            (current.name, spend_url, window == "current"),
            (previous.name, f"{spend_url}?window=previous", window == "previous"),
        ],
        "csv_window_url": f"{csv_url}?window={window}",
        "csv_url": csv_url,
        "connection_base": reverse("ladder:connections"),
    }
    return render(request, "ladder/spend.html", context, partials=("spend-breakdown",))


@require_GET
@viewer_required
def spend_csv(request: HtmxHttpRequest) -> StreamingHttpResponse:
    """The ledger as CSV, written by the API export's writer: `?window=current` or
    `previous` for that budget window's entries, else every entry; newest first."""
    now = dashboard.current_time()
    wanted = request.GET.get("window")
    filters = services.SpendFilters()
    if wanted == "current":
        filters = services.window_filters("current", now=now)
    elif wanted == "previous":
        filters = services.window_filters("previous", now=now)
    response = StreamingHttpResponse(
        services.spend_csv_lines(filters), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{services.spend_csv_filename(now)}"'
    return response
