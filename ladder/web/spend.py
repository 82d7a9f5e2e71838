"""The spend and savings page: what the paid rungs cost per UTC day and what the plans
saved, over the current and the previous budget window (two bar charts and the table of
their numbers), the budgets, a period's breakdown by connection, by model and by token,
the plans' utilisation over it, and the
ledger's CSV download for a signed-in viewer (the API's export needs a token)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

from django.http import StreamingHttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from ladder import services
from ladder.core import BudgetWindow
from ladder.core.budgets import utc_day
from ladder.core.plan_use import PlanUse
from ladder.core.prose import money_text
from ladder.core.spend_series import PAID, SpendDay, WindowSeries, budget_windows
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
class Money:
    """An amount to the cent, and exact (as the ledger holds it) for a hover title."""

    text: str
    exact: str

    def __str__(self) -> str:
        return self.text


def money(value: Decimal) -> Money:
    """To the cent for reading; the exact amount when the cents round it."""
    cents = Decimal(value).quantize(Decimal("0.01"))
    exact = format(Decimal(value).normalize(), "f") if cents != value else ""
    return Money(format(cents, "f"), exact)


@dataclass(frozen=True, slots=True)
class DayLine:
    """A row of the table beside the charts, money to the cent."""

    day: str
    cheap: Money
    premium: Money
    paid: Money
    saved: Money


def _line(day: str, spend: SpendDay | WindowSeries) -> DayLine:
    return DayLine(
        day,
        money(spend.cheap_usd),
        money(spend.premium_usd),
        money(spend.paid_usd),
        money(spend.saved_usd),
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
    billed: Money
    listed: Money
    saved: Money


def _breakdown_lines(rows: list[services.BreakdownRow]) -> list[BreakdownLine]:
    return [
        BreakdownLine(
            r.key,
            r.requests,
            money(r.billed_usd),
            money(r.list_price_usd),
            money(r.saved_usd),
        )
        for r in rows
    ]


@dataclass(frozen=True, slots=True)
class PlanUseLine:
    """A plan connection's utilisation over the period, percents to one decimal."""

    connection_id: str
    resets: int
    used: str
    left: str
    unused_windows: str
    last_reset_at: datetime
    last_left: str


def plan_use_lines(uses: list[PlanUse]) -> list[PlanUseLine]:
    """The plan utilisation table's rows (no query)."""
    return [
        PlanUseLine(
            use.connection_id,
            use.resets,
            f"{use.mean_used_percent:.1f}",
            f"{use.mean_left_percent:.1f}",
            f"{use.unused_windows:.1f}",
            use.last.reset_at,
            f"{use.last.lowest_remaining_percent:.1f}",
        )
        for use in uses
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


# The periods offered, in the order shown; `?from=` and `?to=` (UTC days, both included)
# choose any other. The default is this budget window.
PRESETS = ("today", "7d", "this", "last", "mtd")
ONE_DAY = timedelta(days=1)
# The longest custom range: about a year of days in the chart and its table.
MAX_PERIOD_DAYS = 400


@dataclass(frozen=True, slots=True)
class Period:
    """The period the page's period section shows: [start, end) at UTC midnights."""

    key: str  # a preset, or "custom"
    label: str
    start: datetime
    end: datetime
    query: str  # the URL query that chooses it

    @property
    def last_day(self) -> date:
        """The period's last day (included)."""
        return (self.end - ONE_DAY).date()


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def _day_param(value: str) -> date | None:
    try:
        return date.fromisoformat(value) if len(value) == 10 else None
    except ValueError:
        return None


def preset_period(key: str, now: datetime, config_window: BudgetWindow) -> Period:
    """A preset period at `now`: today, the last 7 days (today included), this or the
    last budget window, or the month to date."""
    today = utc_day(now)
    tomorrow = _midnight(today + ONE_DAY)
    this_name, last_name = WINDOW_NAMES[config_window.value]
    if key == "today":
        return Period(key, "today", _midnight(today), tomorrow, "period=today")
    if key == "7d":
        return Period(key, "the last 7 days", _midnight(today - 6 * ONE_DAY), tomorrow, "period=7d")
    if key == "mtd":
        return Period(
            key, "this month to date", _midnight(today.replace(day=1)), tomorrow, "period=mtd"
        )
    (previous_start, previous_end), (start, end) = budget_windows(config_window, now)
    if key == "last":
        return Period(key, last_name, previous_start, previous_end, "period=last")
    return Period("this", this_name, start, end, "period=this")


def period_days_query(period: Period) -> str:
    """The query of a period as its first and last days (the CSV download's)."""
    return urlencode({"from": f"{period.start:%Y-%m-%d}", "to": f"{period.last_day:%Y-%m-%d}"})


def chosen_period(
    request: HtmxHttpRequest, now: datetime, config_window: BudgetWindow
) -> tuple[Period, str | None]:
    """The period the query asks for, and why a custom range was refused (then: this
    budget window). `?window=previous` (older links) is the last budget window."""
    first = _day_param(request.GET.get("from", ""))
    last = _day_param(request.GET.get("to", ""))
    if "from" in request.GET or "to" in request.GET:
        if first is None or last is None:
            refusal = "A custom period needs both days as YYYY-MM-DD."
        elif last < first:
            refusal = "The period's last day is before its first day."
        elif (last - first).days >= MAX_PERIOD_DAYS:
            refusal = f"A period is at most {MAX_PERIOD_DAYS} days."
        else:
            label = f"{first:%Y-%m-%d} to {last:%Y-%m-%d}"
            query = urlencode({"from": f"{first:%Y-%m-%d}", "to": f"{last:%Y-%m-%d}"})
            return Period("custom", label, _midnight(first), _midnight(last + ONE_DAY), query), None
        return preset_period("this", now, config_window), refusal
    key = request.GET.get("period", "")
    if request.GET.get("window") == "previous" and not key:
        key = "last"
    return preset_period(key if key in PRESETS else "this", now, config_window), None


@require_GET
@viewer_required
def spend_page(request: HtmxHttpRequest) -> TemplateResponse:
    """Spend per day per paid rung and the plans' savings over two budget windows, the
    budgets, and any period's days, totals and breakdown (`?period=` a preset, or
    `?from=&to=` UTC days; `?window=previous`, as older links say, the last window)."""
    now = dashboard.current_time()
    config = services.load_config()
    config_window = config.budget_window
    period, refusal = chosen_period(request, now, config_window)
    report = services.spend_report(now=now, period=(period.start, period.end), config=config)
    this_name, last_name = WINDOW_NAMES[report.config.budget_window.value]
    current = _window_view(this_name, report.current)
    previous = _window_view(last_name, report.previous)
    spend_url = reverse("ladder:spend")
    csv_url = reverse("ladder:spend-csv")
    breakdown = report.breakdown
    shown = _window_view(period.label, report.period)
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
        "previous_spend": [(r.label, money(report.previous.spent_on(r))) for r in PAID],
        "breakdown": breakdown,
        "period": period,
        "period_refusal": refusal,
        "shown": shown,
        "period_chart": daily_bar_chart(None, report.period, (*PAID_SERIES, *SAVED_SERIES)),
        "is_swap": bool(request.htmx),
        "breakdown_total": _breakdown_lines([breakdown.total])[0],
        "by_connection": _breakdown_lines(breakdown.by_connection),
        "by_model": _breakdown_lines(breakdown.by_model),
        "by_token": _breakdown_lines(breakdown.by_token),
        "plan_use": plan_use_lines(report.plan_use),
        "breakdown_rows": services.BREAKDOWN_ROWS,
        "spend_url": spend_url,
        "presets": [
            (
                preset.label,
                f"{spend_url}?{preset.query}",
                preset.key == period.key,
            )
            for preset in (preset_period(key, now, config_window) for key in PRESETS)
        ],
        "csv_window_url": f"{csv_url}?{period_days_query(period)}",
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
    first = _day_param(request.GET.get("from", ""))
    last = _day_param(request.GET.get("to", ""))
    if first is not None and last is not None and first <= last:
        filters = services.SpendFilters(since=_midnight(first), until=_midnight(last + ONE_DAY))
    elif wanted == "current":
        filters = services.window_filters("current", now=now)
    elif wanted == "previous":
        filters = services.window_filters("previous", now=now)
    response = StreamingHttpResponse(
        services.spend_csv_lines(filters), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{services.spend_csv_filename(now)}"'
    return response
