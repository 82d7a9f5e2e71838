"""The pool timeline page: who entered or left a published pool, when and why (newest
first, 500 a page), with a strip chart whose text alternative is the table itself."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from ladder.core import SUBSCRIPTION_AUTO_ID, parse_auto_id
from ladder.core.auto_ids import InvalidAutoId
from ladder.models import PoolTransition
from ladder.services import timeline
from omniroute_admin import dashboard
from omniroute_admin.dashboard import HtmxHttpRequest, render, viewer_required

PAGE_SIZE = 500


@dataclass(frozen=True, slots=True)
class StripMark:
    x: str
    y: str
    change: str
    label: str


@dataclass(frozen=True, slots=True)
class Strip:
    """Geometry of the strip chart: a mark per transition along the time axis, entries
    above the axis, departures below (SVG user units)."""

    width: int
    height: int
    marks: list[StripMark]
    first: datetime | None
    last: datetime | None


STRIP_WIDTH = 720
STRIP_HEIGHT = 80
STRIP_MARGIN = 12


def strip(rows: list[PoolTransition]) -> Strip:
    """The strip of these transitions, scaled to their own time span."""
    if not rows:
        return Strip(STRIP_WIDTH, STRIP_HEIGHT, [], None, None)
    first, last = rows[-1].at, rows[0].at
    span = (last - first).total_seconds() or 1.0
    usable = STRIP_WIDTH - 2 * STRIP_MARGIN
    marks = []
    for row in rows:
        x = STRIP_MARGIN + usable * (row.at - first).total_seconds() / span
        y = STRIP_HEIGHT / 2 - 16 if row.change == "entered" else STRIP_HEIGHT / 2 + 16
        label = f"{row.at:%Y-%m-%d %H:%M:%S} UTC: {row.connection_id} {row.change}"
        if row.reason:
            label += f" ({row.reason})"
        marks.append(StripMark(f"{x:.1f}", f"{y:.1f}", row.change, label))
    return Strip(STRIP_WIDTH, STRIP_HEIGHT, marks, first, last)


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
    """The transitions of one auto id's pool, newest first, filtered by since/until."""
    wanted = request.GET.get("auto_id", "") or SUBSCRIPTION_AUTO_ID.auto_id
    try:
        auto_id = parse_auto_id(wanted)
    except InvalidAutoId as error:
        return dashboard.not_found_page(request, str(error))
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
    try:
        after = timeline.decode_transition_cursor(request.GET.get("after") or None)
    except ValueError as error:
        after = None
        notices.append(str(error))
    page = timeline.transition_page(
        auto_id.auto_id, limit=PAGE_SIZE, after=after, since=bounds["since"], until=bounds["until"]
    )
    filters = {"auto_id": auto_id.auto_id}
    for name, moment in bounds.items():
        if moment is not None:
            filters[name] = moment.strftime("%Y-%m-%dT%H:%M:%S")
    context = {
        "now": dashboard.current_time(),
        "auto_id": auto_id,
        "rows": page.rows,
        "strip": strip(page.rows),
        "notices": notices,
        "since": filters.get("since", ""),
        "until": filters.get("until", ""),
        "is_first_page": after is None,
        "first_page_query": urlencode(filters),
        "next_query": urlencode({**filters, "after": page.next_cursor}) if page.next_cursor else "",
        "recorded": timeline.recorded_auto_ids(),
        "timeline_url": reverse("ladder:pool-timeline"),
        "pools_url": reverse("ladder:pools"),
        "connection_base": reverse("ladder:connections"),
        "page_size": PAGE_SIZE,
    }
    return render(request, "ladder/pool_timeline.html", context, partials=("timeline-table",))
