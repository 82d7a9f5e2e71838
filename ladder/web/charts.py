"""The dashboard's server-rendered SVG: the 24-hour remaining-quota chart of a connection
and the drawing of the hysteresis band on the settings page (geometry only; the
templates draw it)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ladder.core import LadderConfig
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


@dataclass
class Chart:
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
    exit_y: str = ""
    reentry_y: str = ""
    band_height: str = ""
    y_ticks: list[tuple[str, str]] = field(default_factory=list)

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


def _coordinate(value: float) -> str:
    return f"{value:.1f}"


def remaining_chart(
    readings: Sequence[QuotaReading],
    transitions: Sequence[HysteresisTransition],
    config: LadderConfig,
    since: datetime,
    now: datetime,
) -> Chart:
    """Remaining % over [since, now] as a step line, with the exit cutoff and the re-entry
    floor drawn across and each hysteresis transition marked where it happened."""
    chart = Chart()
    span = max((now - since).total_seconds(), 1.0)
    plot_width = chart.plot_width
    plot_height = chart.plot_height

    def x_of(at: datetime) -> float:
        offset = min(max((at - since).total_seconds(), 0.0), span)
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
                f"{when}: {number_text(reading.remaining_percent)} % left ({reading.status})",
            )
        )
    if previous_y is not None and readings:
        steps.append(f"{_coordinate(x_of(now))},{_coordinate(previous_y)}")
    chart.line = _path(steps)
    for transition in transitions:
        chart.marks.append(
            ChartMark(
                _coordinate(x_of(transition.at)),
                transition.state,
                f"{transition.at:%H:%M:%S} UTC: {transition.get_state_display()} "
                f"({transition.reason})",
            )
        )
    exit_y = y_of(config.exit_cutoff_percent)
    reentry_y = y_of(config.reentry_floor)
    chart.exit_y = _coordinate(exit_y)
    chart.reentry_y = _coordinate(reentry_y)
    chart.band_height = _coordinate(max(exit_y - reentry_y, 0.0))
    chart.y_ticks = [(_coordinate(y_of(p)), str(p)) for p in (0, 25, 50, 75, 100)]
    first_tick = since.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    tick = first_tick
    while tick <= now:
        if tick.hour % 4 == 0:
            chart.ticks.append(ChartTick(_coordinate(x_of(tick)), f"{tick:%H:%M}"))
        tick += timedelta(hours=1)
    return chart


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
