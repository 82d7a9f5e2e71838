"""The dashboard's server-rendered SVG: the 24-hour remaining-quota chart of a connection
and the drawing of the hysteresis band on the settings page (geometry only; the
templates draw it)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ladder.core import LadderConfig
from ladder.core.prose import percent_text
from ladder.models import HysteresisTransition, QuotaReading
from ladder.web.presenters import number_text


@dataclass(frozen=True, slots=True)
class ChartPoint:
    x: str
    y: str
    status: str
    label: str


@dataclass(frozen=True, slots=True)
class ChartMark:
    x: str
    state: str
    label: str


@dataclass(frozen=True, slots=True)
class ChartTick:
    x: str
    label: str
    anchor: str = "middle"  # "start"/"end" at the plot's edges, so no label is cut off


@dataclass(frozen=True, slots=True)
class ThresholdSegment:
    """The exit cutoff and re-entry floor over the period they applied (x1..x2)."""

    x1: str
    x2: str
    width: str
    exit_y: str
    reentry_y: str
    band_height: str
    exit_percent: float
    reentry_percent: float
    is_now: bool  # the segment of the current settings (labelled "now")
    label: str


@dataclass(frozen=True, slots=True)
class SettingsPeriod:
    """Thresholds that applied from `since` (None: from before the chart's start)."""

    since: datetime | None
    exit_percent: float
    reentry_percent: float


class PlotArea:
    """The plot area inside a chart's margins (SVG user units), for a dataclass with
    `width`, `height`, `left`, `right`, `top` and `bottom`."""

    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int

    @property
    def plot_bottom(self) -> int:
        return self.height - self.bottom

    @property
    def plot_right(self) -> int:
        return self.width - self.right

    @property
    def plot_width(self) -> int:
        return self.plot_right - self.left

    @property
    def plot_height(self) -> int:
        return self.plot_bottom - self.top


@dataclass
class Chart(PlotArea):
    """Geometry of the remaining-quota chart (all numbers are SVG user units)."""

    width: int = 720
    height: int = 220
    left: int = 40
    right: int = 12
    top: int = 12
    bottom: int = 28
    line: str = ""
    points: list[ChartPoint] = field(default_factory=list)
    marks: list[ChartMark] = field(default_factory=list)
    ticks: list[ChartTick] = field(default_factory=list)
    thresholds: list[ThresholdSegment] = field(default_factory=list)
    y_ticks: list[tuple[str, str]] = field(default_factory=list)
    start: datetime | None = None
    end: datetime | None = None
    span_text: str = ""  # what the x axis covers, in words

    @property
    def now_threshold(self) -> ThresholdSegment | None:
        return self.thresholds[-1] if self.thresholds else None

    def x_at(self, at: datetime) -> float:
        """The x of an instant on the time axis (clamped to the plot)."""
        if self.start is None or self.end is None:
            return float(self.left)
        span = max((self.end - self.start).total_seconds(), 1.0)
        offset = min(max((at - self.start).total_seconds(), 0.0), span)
        return self.left + self.plot_width * offset / span

    def y_at(self, percent: float) -> float:
        """The y of a remaining percent (clamped to 0..100)."""
        return self.top + self.plot_height * (1 - min(max(percent, 0.0), 100.0) / 100)


def _coordinate(value: float) -> str:
    return f"{value:.1f}"


# Tick steps of the time axis, in minutes: the first that gives at most 6 ticks.
TICK_STEPS_MINUTES = (1, 2, 5, 10, 15, 30, 60, 120, 180, 240, 360, 720)
# The x axis never spans less than this, so two readings a second apart stay apart.
MIN_SPAN = timedelta(minutes=10)


def time_ticks(start: datetime, end: datetime, max_ticks: int = 7) -> list[datetime]:
    """Round instants inside [start, end] at the smallest step giving at most
    `max_ticks` of them (every 5 min over 14 min, every 4 h over a day)."""
    span_minutes = (end - start).total_seconds() / 60
    step = next(
        (m for m in TICK_STEPS_MINUTES if span_minutes / m + 1 <= max_ticks),
        TICK_STEPS_MINUTES[-1],
    )
    midnight = start.replace(hour=0, minute=0, second=0, microsecond=0)
    minutes = math.ceil((start - midnight).total_seconds() / 60 / step) * step
    ticks = []
    tick = midnight + timedelta(minutes=minutes)
    while tick <= end:
        ticks.append(tick)
        tick += timedelta(minutes=step)
    return ticks


def _clock(at: datetime) -> str:
    return f"{at:%H:%M}"


def range_text(begin: datetime, finish: datetime) -> str:
    """ "18:26 to 19:40 UTC" within one day; across midnight each end with its date
    ("2026-12-02 18:26 to 2026-12-03 18:25 UTC"), never a range that reads backwards."""
    if begin.date() == finish.date():
        return f"{begin:%H:%M} to {finish:%H:%M} UTC"
    return f"{begin:%Y-%m-%d %H:%M} to {finish:%Y-%m-%d %H:%M} UTC"


def _span_words(seconds: float) -> str:
    minutes = round(seconds / 60)
    if minutes < 120:
        return f"{minutes} min"
    return (
        f"{minutes / 60:.0f} h" if minutes % 60 == 0 or minutes >= 600 else f"{minutes / 60:.1f} h"
    )


def remaining_chart(
    readings: Sequence[QuotaReading],
    transitions: Sequence[tuple[HysteresisTransition, str]],
    config: LadderConfig,
    since: datetime,
    now: datetime,
    periods: Sequence[SettingsPeriod] = (),
    until: datetime | None = None,
) -> Chart:
    """Remaining % as a step line over the span the data covers (from the first reading
    or transition within [since, now] to now; at least MIN_SPAN), with the exit cutoff
    and the re-entry floor drawn over the period each value applied (`periods`, oldest
    first, from the settings' audit; the last is the current settings, labelled "now")
    and each hysteresis transition (with its sentence) marked where it happened.
    `until`: the time axis goes on past now to that instant (a forecast's room)."""
    chart = Chart()
    end = max(now, until) if until is not None else now
    instants = [r.checked_at for r in readings if r.checked_at >= since] + [
        t.at for t, _ in transitions if t.at >= since
    ]
    start = min(instants, default=since)
    start = min(start, now - MIN_SPAN) if instants else since
    start = max(start, since)
    chart.start, chart.end = start, end
    span = max((end - start).total_seconds(), 1.0)
    plot_width = chart.plot_width
    plot_height = chart.plot_height
    whole_window = start == since
    past = max((now - start).total_seconds(), 1.0)
    chart.span_text = (
        f"the last {_span_words(past)}"
        if whole_window
        else f"{_span_words(past)} of data, {range_text(start, now)} "
        f"(no earlier reading in the last {_span_words((now - since).total_seconds())})"
    )
    if end > now:
        chart.span_text += f", and the forecast to {end:%H:%M} UTC"

    def x_of(at: datetime) -> float:
        offset = min(max((at - start).total_seconds(), 0.0), span)
        return chart.left + plot_width * offset / span

    def y_of(percent: float) -> float:
        return chart.top + plot_height * (1 - min(max(percent, 0.0), 100.0) / 100)

    steps: list[str] = []
    previous_y: float | None = None
    for reading in readings:
        x = x_of(reading.checked_at)
        when = f"{reading.checked_at:%H:%M:%S} UTC"
        if reading.remaining_percent is None:
            chart.points.append(
                ChartPoint(
                    _coordinate(x), _coordinate(chart.plot_bottom), "UNKNOWN", f"{when}: unknown"
                )
            )
            previous_y = None
            continue
        y = y_of(reading.remaining_percent)
        if previous_y is not None:
            steps.append(f"{_coordinate(x)},{_coordinate(previous_y)}")
        elif steps:
            steps.append("M")
        steps.append(f"{_coordinate(x)},{_coordinate(y)}")
        previous_y = y
        chart.points.append(
            ChartPoint(
                _coordinate(x),
                _coordinate(y),
                reading.status,
                f"{when}: {percent_text(reading.remaining_percent)} % left ({reading.status})",
            )
        )
    if previous_y is not None and readings:
        steps.append(f"{_coordinate(x_of(now))},{_coordinate(previous_y)}")
    chart.line = _path(steps)
    for transition, why in transitions:
        chart.marks.append(
            ChartMark(
                _coordinate(x_of(transition.at)),
                transition.state,
                f"{transition.at:%H:%M:%S} UTC: {transition.get_state_display()} ({why})",
            )
        )
    chart.thresholds = _threshold_segments(periods, config, start, end, x_of, y_of)
    chart.y_ticks = [(_coordinate(y_of(p)), str(p)) for p in (0, 25, 50, 75, 100)]
    ticks = time_ticks(start, end)
    edge = 16.0
    chart.ticks = [
        ChartTick(
            _coordinate(x_of(t)),
            _clock(t),
            "start"
            if x_of(t) < chart.left + edge
            else "end"
            if x_of(t) > chart.plot_right - edge
            else "middle",
        )
        for t in ticks
    ]
    return chart


def settings_periods(
    changes: Sequence[tuple[datetime, dict[str, Any], dict[str, Any]]],
) -> list[SettingsPeriod]:
    """The thresholds' periods from the settings' audited changes (oldest first): what
    held before the first change, then what each change set (floors below the cutoff
    raised to it, as the ladder applies them). Empty: no change in the window."""
    if not changes:
        return []

    def period(since: datetime | None, values: dict[str, Any]) -> SettingsPeriod:
        exit_percent = float(values.get("exit_cutoff_percent", 0.0))
        floor = float(values.get("reentry_min_remaining_percent", exit_percent))
        return SettingsPeriod(since, exit_percent, max(floor, exit_percent))

    return [period(None, changes[0][1])] + [period(at, after) for at, _, after in changes]


def _threshold_segments(
    periods: Sequence[SettingsPeriod],
    config: LadderConfig,
    start: datetime,
    now: datetime,
    x_of: Callable[[datetime], float],
    y_of: Callable[[float], float],
) -> list[ThresholdSegment]:
    """One segment per settings period inside [start, now]; the current settings
    (`config`) close the list, from the last change (or the start) to now."""
    current = SettingsPeriod(
        periods[-1].since if periods else None, config.exit_cutoff_percent, config.reentry_floor
    )
    spans = [*periods[:-1], current] if periods else [current]
    segments = []
    for index, period in enumerate(spans):
        begin = max(period.since or start, start)
        finish = spans[index + 1].since if index + 1 < len(spans) else now
        assert finish is not None or index + 1 == len(spans)
        finish = min(finish or now, now)
        if finish <= start:
            continue
        exit_y, reentry_y = y_of(period.exit_percent), y_of(period.reentry_percent)
        is_now = index + 1 == len(spans)
        exit_text, floor_text = (
            number_text(period.exit_percent),
            number_text(period.reentry_percent),
        )
        when = (
            f"now, since {begin:%H:%M} UTC"
            if is_now and period.since is not None and period.since > start
            else "now"
            if is_now
            else range_text(begin, finish)
        )
        segments.append(
            ThresholdSegment(
                x1=_coordinate(x_of(begin)),
                x2=_coordinate(x_of(finish)),
                width=_coordinate(x_of(finish) - x_of(begin)),
                exit_y=_coordinate(exit_y),
                reentry_y=_coordinate(reentry_y),
                band_height=_coordinate(max(exit_y - reentry_y, 0.0)),
                exit_percent=period.exit_percent,
                reentry_percent=period.reentry_percent,
                is_now=is_now,
                label=f"exit cutoff {exit_text} %, re-entry floor {floor_text} % ({when})",
            )
        )
    return segments


def _path(steps: list[str]) -> str:
    """An SVG path through the points; "M" entries start a new segment after a gap."""
    parts: list[str] = []
    move = True
    for step in steps:
        if step == "M":
            move = True
            continue
        parts.append(("M" if move else "L") + step)
        move = False
    return " ".join(parts)


@dataclass(frozen=True, slots=True)
class BandDrawing:
    """The hysteresis band on 0..100, plus a zoom on its low end where the band lives."""

    exit_cutoff: float
    reentry_configured: float
    reentry_floor: float
    is_floor_raised: bool
    zoom_max: int

    def x(self, percent: float, scale_max: float, width: float = 560.0) -> str:
        """The x coordinate of a percent on a scale drawn from 20 to 20 + width."""
        return _coordinate(20 + width * min(max(percent, 0.0), scale_max) / scale_max)

    @property
    def full(self) -> dict[str, str]:
        return self._marks(100)

    @property
    def labels(self) -> list[BandLabel]:
        """The zoom's two labels, laid out so they never overlap nor leave the drawing:
        each starts at its mark (the exit label ends at it), pushed inside the edges;
        when they would touch, the re-entry label takes a second row."""
        marks = self.zoom
        exit_text = f"exit {number_text(self.exit_cutoff)} %"
        floor_text = f"re-entry {number_text(self.reentry_floor)} %"
        exit_width, floor_width = _text_width(exit_text), _text_width(floor_text)
        exit_left = _clamp(float(marks["exit"]) - exit_width, exit_width)
        floor_left = _clamp(float(marks["floor"]), floor_width)
        row = BAND_LABEL_Y
        if exit_left + exit_width + LABEL_GAP > floor_left:
            row += BAND_LABEL_ROW
        return [
            BandLabel("exit", exit_text, _coordinate(exit_left), str(BAND_LABEL_Y)),
            BandLabel("floor", floor_text, _coordinate(floor_left), str(row)),
        ]

    @property
    def height(self) -> int:
        """The drawing's height: one more row when the labels need two."""
        return int(self.labels[-1].y) + 4

    @property
    def zoom(self) -> dict[str, str]:
        return self._marks(self.zoom_max)

    def _marks(self, scale_max: float) -> dict[str, str]:
        exit_x = float(self.x(self.exit_cutoff, scale_max))
        floor_x = float(self.x(self.reentry_floor, scale_max))
        return {
            "exit": _coordinate(exit_x),
            "floor": _coordinate(floor_x),
            "configured": self.x(self.reentry_configured, scale_max),
            "band_width": _coordinate(max(floor_x - exit_x, 0.0)),
            "out_width": _coordinate(exit_x - 20),
            "ok_width": _coordinate(580 - floor_x),
            "max": str(int(scale_max)),
            "mid": str(int(scale_max / 2)) if scale_max % 2 == 0 else f"{scale_max / 2:g}",
        }


# The band drawing's labels: 11 px bold text, about 6.6 user units a character.
BAND_LABEL_Y = 146
BAND_LABEL_ROW = 14
LABEL_GAP = 8
BAND_WIDTH = 600
CHAR_WIDTH = 6.6


@dataclass(frozen=True, slots=True)
class BandLabel:
    kind: str  # exit, floor
    text: str
    x: str  # the left edge (text-anchor start)
    y: str


def _text_width(text: str) -> float:
    return len(text) * CHAR_WIDTH


def _clamp(left: float, width: float) -> float:
    """A label's left edge kept inside the drawing (2 units of margin each side)."""
    return min(max(left, 2.0), BAND_WIDTH - 2.0 - width)


def band_drawing(exit_cutoff: float, reentry_configured: float) -> BandDrawing:
    """The drawing of a band; a re-entry floor below the exit cutoff is raised to it."""
    floor = max(exit_cutoff, reentry_configured)
    zoom_max = min(100, max(10, int(math.ceil(max(floor, reentry_configured) * 2 / 10) * 10)))
    return BandDrawing(
        exit_cutoff=exit_cutoff,
        reentry_configured=reentry_configured,
        reentry_floor=floor,
        is_floor_raised=reentry_configured < exit_cutoff,
        zoom_max=zoom_max,
    )
