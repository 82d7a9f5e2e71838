"""The forecast drawn on a connection's 24-hour chart: a dashed line from the newest
reading to the run-out at the exit cutoff, the reset as a vertical line, and the same in
words (the drawing's text alternative). Geometry only; the templates draw it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from ladder.core.prose import instant_text, percent_text
from ladder.models import QuotaReading
from ladder.services import ConnectionForecast
from ladder.web.charts import Chart

# The chart's time axis goes on at most this far past now for a forecast, so the last
# 24 hours keep most of its width; a later run-out or reset is named in words.
HORIZON: Final = timedelta(hours=8)


@dataclass(frozen=True, slots=True)
class ForecastDrawing:
    """What the chart draws of one forecast, and the words that say the same."""

    line: str  # an SVG path, "" when nothing is drawn (no instant, or already run out)
    line_label: str
    now_x: str
    reset_x: str | None  # None: no reset, or past the chart's end
    reset_label: str
    runs_out_x: str | None
    sentence: str
    basis: str


def forecast_until(item: ConnectionForecast | None, now: datetime) -> datetime | None:
    """How far past now the chart's axis goes: the later of the run-out and the reset,
    at most `HORIZON` ahead (None: no forecast instant, nothing to draw ahead)."""
    if item is None or item.forecast.runs_out_at is None:
        return None
    ends = [item.forecast.runs_out_at]
    if item.forecast.reset_at is not None:
        ends.append(item.forecast.reset_at)
    latest = max(ends)
    if latest <= now:
        return None
    return min(latest + timedelta(minutes=10), now + HORIZON)


def _point(x: float, y: float) -> str:
    return f"{x:.1f},{y:.1f}"


def forecast_drawing(
    chart: Chart,
    item: ConnectionForecast | None,
    readings: Sequence[QuotaReading],
    exit_cutoff_percent: float,
    now: datetime,
) -> ForecastDrawing | None:
    """The forecast line and the reset on `chart` (None: no forecast instant)."""
    if item is None or item.forecast.runs_out_at is None or chart.end is None:
        return None
    made = item.forecast
    runs_out_at = made.runs_out_at
    assert runs_out_at is not None
    end = chart.end
    line = ""
    line_label = ""
    known = [r for r in readings if r.remaining_percent is not None]
    if not made.has_run_out and known:
        newest = known[-1]
        start_at, start_left = newest.checked_at, float(newest.remaining_percent or 0.0)
        stop_at, stop_left = runs_out_at, exit_cutoff_percent
        if stop_at > end and stop_at > start_at:
            # Cut at the chart's edge, on the same straight line.
            share = (end - start_at) / (stop_at - start_at)
            stop_left = start_left + (exit_cutoff_percent - start_left) * share
            stop_at = end
        line = (
            f"M{_point(chart.x_at(start_at), chart.y_at(start_left))} "
            f"L{_point(chart.x_at(stop_at), chart.y_at(stop_left))}"
        )
        line_label = (
            f"Forecast: from {percent_text(start_left)} % at {start_at:%H:%M} UTC to the exit "
            f"cutoff ({percent_text(exit_cutoff_percent)} %) at {instant_text(runs_out_at)}"
        )
    reset_at = made.reset_at
    reset_x = None
    reset_label = ""
    if reset_at is not None:
        reset_label = f"Reset at {instant_text(reset_at)}"
        if now <= reset_at <= end:
            reset_x = f"{chart.x_at(reset_at):.1f}"
    runs_out_x = f"{chart.x_at(runs_out_at):.1f}" if runs_out_at <= end else None
    return ForecastDrawing(
        line=line,
        line_label=line_label,
        now_x=f"{chart.x_at(now):.1f}",
        reset_x=reset_x,
        reset_label=reset_label,
        runs_out_x=runs_out_x,
        sentence=item.sentence,
        basis=made.basis,
    )
