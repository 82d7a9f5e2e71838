"""The pool timeline page: who entered or left a published pool, when and why (newest
first, 500 a page, past sentences in the past tense), over a time range picked in the
URL, with a lane per connection on a real time axis, the spans in which the pool was
empty shaded, and a text alternative that says the same in words."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from ladder.core import SUBSCRIPTION_AUTO_ID, parse_auto_id
from ladder.core.auto_ids import InvalidAutoId
from ladder.core.timeline import Lanes, Span
from ladder.services import timeline
from ladder.web.presenters import duration_text
from omniroute_admin import dashboard
from omniroute_admin.dashboard import HtmxHttpRequest, render, viewer_required

PAGE_SIZE = 500

# The ranges the picker offers, ending now; the default is the last 24 hours.
RANGES: Final[dict[str, tuple[timedelta, str]]] = {
    "1h": (timedelta(hours=1), "last hour"),
    "6h": (timedelta(hours=6), "last 6 hours"),
    "24h": (timedelta(hours=24), "last 24 hours"),
    "7d": (timedelta(days=7), "last 7 days"),
    "30d": (timedelta(days=30), "last 30 days"),
}
DEFAULT_RANGE: Final = "24h"

CHART_WIDTH: Final = 720
LABEL_WIDTH: Final = 130
RIGHT_MARGIN: Final = 12
LANE_HEIGHT: Final = 22
BAR_HEIGHT: Final = 14
TOP: Final = 6
AXIS_SPACE: Final = 30
LABEL_CHARS: Final = 18
# Tick steps, from the finest: the first that gives at most MAX_TICKS ticks is used.
TICK_STEPS: Final = tuple(
    timedelta(minutes=m) for m in (1, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880, 10080)
)
MAX_TICKS: Final = 8


@dataclass(frozen=True, slots=True)
class Bar:
    """A span drawn on the chart (SVG user units) and said in words."""

    x: str
    width: str
    label: str


@dataclass(frozen=True, slots=True)
class LaneRow:
    connection_id: str
    name: str  # the id as drawn (long ids shortened; the full id is in `text`)
    y: str
    bar_y: str
    text_y: str
    track_y: str
    bars: tuple[Bar, ...]
    text: str
    is_in_now: bool  # in the pool at the range's end


@dataclass(frozen=True, slots=True)
class Tick:
    x: str
    label: str


@dataclass(frozen=True, slots=True)
class LaneChart:
    width: int
    height: int
    plot_left: int
    plot_right: int
    plot_bottom: int
    tick_label_y: int
    rows: tuple[LaneRow, ...]
    empty: tuple[Bar, ...]
    ticks: tuple[Tick, ...]
    empty_text: str
    is_empty_now: bool  # the pool had no member at the range's end


def _when(instant: datetime) -> str:
    return f"{instant.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def _span_text(span: Span, end: datetime, is_live: bool) -> str:
    began, ended = span
    length = duration_text((ended - began).total_seconds())
    if is_live and ended == end:
        return f"from {_when(began)}, still empty ({length} so far)"
    return f"from {_when(began)} to {_when(ended)} ({length})"


def _ticks(start: datetime, end: datetime, scale: float) -> tuple[Tick, ...]:
    span = end - start
    step = next((s for s in TICK_STEPS if span / s <= MAX_TICKS), TICK_STEPS[-1])
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    first = epoch + step * -(-(start - epoch) // step)  # the first multiple at or after start
    ticks = []
    moment = first
    while moment <= end:
        if step >= timedelta(days=1):
            label = f"{moment:%m-%d}"
        elif span > timedelta(days=1):
            label = f"{moment:%m-%d %H:%M}"
        else:
            label = f"{moment:%H:%M}"
        x = LABEL_WIDTH + (moment - start).total_seconds() * scale
        ticks.append(Tick(f"{x:.1f}", label))
        moment += step
    return tuple(ticks)


def lane_chart(found: Lanes, *, is_live: bool) -> LaneChart:
    """The geometry and the words of a pool's lanes: x is time, linear over the range."""
    start, end = found.start, found.end
    total = max((end - start).total_seconds(), 1.0)
    plot_right = CHART_WIDTH - RIGHT_MARGIN
    scale = (plot_right - LABEL_WIDTH) / total

    def bar(span: Span, label: str) -> Bar:
        x = LABEL_WIDTH + (span[0] - start).total_seconds() * scale
        width = max((span[1] - span[0]).total_seconds() * scale, 0.5)
        return Bar(f"{x:.1f}", f"{width:.1f}", label)

    rows = []
    for index, lane in enumerate(found.lanes):
        y = TOP + index * LANE_HEIGHT
        name = lane.connection_id
        if len(name) > LABEL_CHARS:
            name = name[: LABEL_CHARS - 1] + "…"
        rows.append(
            LaneRow(
                lane.connection_id,
                name,
                str(y),
                str(y + (LANE_HEIGHT - BAR_HEIGHT) // 2),
                str(y + LANE_HEIGHT // 2 + 4),
                str(y + LANE_HEIGHT // 2),
                tuple(
                    bar(span, f"{lane.connection_id} in the pool {_span_text(span, end, False)}")
                    for span in lane.spans
                ),
                f"{lane.connection_id}: in the pool {duration_text(lane.seconds_in)} "
                f"of {duration_text(total)}",
                bool(lane.spans) and lane.spans[-1][1] == end,
            )
        )
    plot_bottom = TOP + max(len(rows), 1) * LANE_HEIGHT
    empty = tuple(
        bar(span, f"The pool was empty {_span_text(span, end, is_live)}") for span in found.empty
    )
    if not found.empty:
        empty_text = "The pool was never empty in this range."
    else:
        times = "once" if len(found.empty) == 1 else f"{len(found.empty)} times"
        empty_text = (
            f"The pool was empty {times} in this range, "
            f"{duration_text(found.seconds_empty)} in all."
        )
    return LaneChart(
        CHART_WIDTH,
        plot_bottom + AXIS_SPACE,
        LABEL_WIDTH,
        plot_right,
        plot_bottom,
        plot_bottom + 18,
        tuple(rows),
        empty,
        _ticks(start, end, scale),
        empty_text,
        bool(found.empty) and found.empty[-1][1] == end,
    )


def _instant(value: str) -> datetime | None:
    """An instant from a filter field (ISO 8601; without an offset: UTC); ValueError."""
    if not value:
        return None
    if len(value) > 40:
        raise ValueError("too long")
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@require_GET
@viewer_required
def pool_timeline(request: HtmxHttpRequest) -> TemplateResponse:
    """The transitions of one auto id's pool over a range (`range` one of RANGES, or a
    custom `since`/`until`), newest first, with its lanes."""
    wanted = request.GET.get("auto_id", "") or SUBSCRIPTION_AUTO_ID.auto_id
    try:
        auto_id = parse_auto_id(wanted)
    except InvalidAutoId as error:
        return dashboard.not_found_page(request, str(error))
    now = dashboard.current_time()
    notices = []
    bounds: dict[str, datetime | None] = {}
    for name in ("since", "until"):
        try:
            bounds[name] = _instant(request.GET.get(name, "").strip())
        except ValueError:
            bounds[name] = None
            notices.append(
                f"{name.capitalize()} is not a date and time (YYYY-MM-DDTHH:MM, UTC): ignored."
            )
    preset: str | None = None
    table_since: datetime | None
    table_until: datetime | None
    if bounds["since"] is None and bounds["until"] is None:
        preset = request.GET.get("range", "") or DEFAULT_RANGE
        if preset not in RANGES:
            notices.append(
                f"Range is one of {', '.join(RANGES)}: the {RANGES[DEFAULT_RANGE][1]} shown."
            )
            preset = DEFAULT_RANGE
        start, end = now - RANGES[preset][0], now
        # A preset ends now: the table takes what is newer too (a clock a little behind).
        table_since, table_until = start, None
    else:
        end = bounds["until"] or now
        start = bounds["since"] or end - RANGES[DEFAULT_RANGE][0]
        table_since, table_until = bounds["since"], bounds["until"]
    try:
        after = timeline.decode_transition_cursor(request.GET.get("after") or None)
    except ValueError as error:
        after = None
        notices.append(str(error))
    page = timeline.transition_page(
        auto_id.auto_id, limit=PAGE_SIZE, after=after, since=table_since, until=table_until
    )
    found = timeline.pool_lanes(auto_id.auto_id, start, end) if start < end else None
    filters = {"auto_id": auto_id.auto_id}
    if preset is not None:
        filters["range"] = preset
    for name, moment in bounds.items():
        if moment is not None:
            filters[name] = moment.strftime("%Y-%m-%dT%H:%M:%S")
    context = {
        "now": now,
        "auto_id": auto_id,
        "rows": page.rows,
        "chart": lane_chart(found, is_live=preset is not None) if found is not None else None,
        "is_too_many": found is None and start < end,
        "lanes_max": timeline.LANES_MAX_TRANSITIONS,
        "range_start": start,
        "range_end": end,
        "preset": preset,
        "ranges": [(key, label) for key, (_, label) in RANGES.items()],
        "notices": notices,
        "since": filters.get("since", ""),
        "until": filters.get("until", ""),
        "is_first_page": after is None,
        "query": urlencode(filters),
        "first_page_query": urlencode(filters),
        "next_query": urlencode({**filters, "after": page.next_cursor}) if page.next_cursor else "",
        "recorded": timeline.recorded_auto_ids(),
        "timeline_url": reverse("ladder:pool-timeline"),
        "pools_url": reverse("ladder:pools"),
        "connection_base": reverse("ladder:connections"),
        "page_size": PAGE_SIZE,
    }
    return render(request, "ladder/pool_timeline.html", context, partials=("timeline-table",))
