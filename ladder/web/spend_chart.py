"""The spend page's server-rendered SVG: a bar per UTC day over the previous and the
current budget window, stacked by series (geometry only; the template draws it, and the
page's table gives the same numbers)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from ladder.core.prose import money_text
from ladder.core.spend_series import SpendDay, WindowSeries
from ladder.web.charts import ChartTick, PlotArea

# A series of a chart: its CSS name, its words, and a day's amount of it.
Series = tuple[str, str, Callable[[SpendDay], Decimal]]


@dataclass(frozen=True, slots=True)
class Bar:
    """One series' part of a day's column (SVG user units)."""

    x: str
    y: str
    width: str
    height: str
    series: str


@dataclass(frozen=True, slots=True)
class DayColumn:
    """A day's stacked bars and what they say ("2026-11-03: cheap 1.25 USD, ...")."""

    day: date
    label: str
    bars: list[Bar]


@dataclass
class BarChart(PlotArea):
    """Geometry of a daily bar chart over two budget windows."""

    width: int = 720
    height: int = 200
    left: int = 56
    right: int = 12
    top: int = 12
    bottom: int = 28
    scale_max: Decimal = Decimal(0)
    columns: list[DayColumn] = field(default_factory=list)
    y_ticks: list[tuple[str, str]] = field(default_factory=list)
    x_ticks: list[ChartTick] = field(default_factory=list)
    divider_x: str = ""  # where the current window starts


def _coordinate(value: float) -> str:
    return f"{value:.1f}"


def nice_ceiling(value: Decimal) -> Decimal:
    """The smallest of 1, 2, 2.5, 5 times a power of ten at or above `value` (> 0): the
    top of the y axis, so its ticks are round amounts."""
    assert value > 0
    power = Decimal(10) ** (value.adjusted())
    for step in (1, 2, Decimal("2.5"), 5, 10):
        if value <= power * step:
            return (power * step).normalize()
    raise AssertionError("unreachable: value <= 10 * its power of ten")


def daily_bar_chart(
    previous: WindowSeries | None, current: WindowSeries, series: Sequence[Series]
) -> BarChart | None:
    """One stacked column per day of the two windows (or of one period: `previous`
    None), through today at the latest: days still to come take no room. Scaled to the
    largest day; None when every day is 0."""
    days = [*(previous.days if previous is not None else ()), *current.days]
    tallest = max(
        (sum((amount(d) for _, _, amount in series), Decimal(0)) for d in days), default=0
    )
    if not tallest:
        return None
    chart = BarChart(scale_max=nice_ceiling(Decimal(tallest)))
    first = previous.start if previous is not None else current.start
    last = days[-1].day
    slots = (last - first).days + 1
    slot = chart.plot_width / slots
    scale = chart.plot_height / float(chart.scale_max)

    def x_of(day: date) -> float:
        return chart.left + slot * (day - first).days

    for day in days:
        base = float(chart.plot_bottom)
        bars = []
        words = []
        for name, text, amount in series:
            value = amount(day)
            words.append(f"{text} {money_text(value)} USD")
            if not value:
                continue
            height = float(value) * scale
            base -= height
            bars.append(
                Bar(
                    _coordinate(x_of(day.day) + slot * 0.15),
                    _coordinate(base),
                    _coordinate(max(slot * 0.7, 1.0)),
                    _coordinate(height),
                    name,
                )
            )
        chart.columns.append(DayColumn(day.day, f"{day.day:%Y-%m-%d}: {', '.join(words)}", bars))
    for fraction in (Decimal(0), Decimal("0.5"), Decimal(1)):
        value = chart.scale_max * fraction
        y = chart.plot_bottom - float(value) * scale
        chart.y_ticks.append((_coordinate(y), money_text(value)))
    chart.x_ticks = [ChartTick(_coordinate(x_of(first)), f"{first:%Y-%m-%d}", "start")]
    if previous is not None and current.start <= last:
        chart.divider_x = _coordinate(x_of(current.start))
        chart.x_ticks.append(ChartTick(chart.divider_x, f"{current.start:%Y-%m-%d}", "middle"))
    if last > (current.start if previous is not None else first):
        chart.x_ticks.append(ChartTick(_coordinate(chart.plot_right), f"{last:%Y-%m-%d}", "end"))
    return chart
