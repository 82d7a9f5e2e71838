"""The pool timeline page (ladder/web/timeline.py): the table of transitions, since/until,
pages of 500, the HTMX fragment, and a query count that does not grow with the rows."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from ladder import services
from ladder.models import PoolMembership, PoolTransition
from ladder.services import decisions
from omniroute_admin import dashboard
from tests.ladder.factories import NOW, make_candidate, make_connection, make_reading
from tests.ladder.web.test_queries import SESSION_OR_USER
from tests.pages import parse
from tests.worlds import htmx_headers, signed_in

pytestmark = pytest.mark.django_db

URL = "/pools/timeline/?auto_id=auto/thrifty"


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


def _transitions(count: int, auto_id: str = "auto/thrifty") -> None:
    PoolMembership.objects.get_or_create(
        auto_id=auto_id, defaults={"members": [], "computed_at": NOW}
    )
    PoolTransition.objects.bulk_create(
        PoolTransition(
            at=NOW + timedelta(seconds=index),
            auto_id=auto_id,
            version=index + 1,
            change="entered" if index % 2 == 0 else "left",
            provider="claude",
            model="sonnet",
            connection_id=f"c-{index}",
            rung="subscription",
            reason=None if index % 2 == 0 else "quota_exhausted",
            detail=f"detail {index}",
        )
        for index in range(count)
    )


def _cells(html: str) -> list[list[str]]:
    tables = parse(html).by_class("timeline")
    if not tables:
        return []
    rows = tables[0].by_tag("tbody")[0].by_tag("tr")
    return [[cell.text for cell in row.by_tag("td")] for row in rows]


def test_the_page_lists_the_recorded_transitions_newest_first(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW + timedelta(minutes=1))
    make_connection("plan")
    make_candidate(connection_id="plan")
    make_reading("plan", remaining_percent=60.0, now=NOW)
    decisions.record_published(now=NOW)
    make_reading("plan", remaining_percent=1.0, now=NOW + timedelta(seconds=30))
    decisions.record_published(now=NOW + timedelta(seconds=30))
    signed_in(client, "olga", "viewer")

    response = client.get(URL)

    assert response.status_code == 200
    rows = _cells(response.content.decode())
    assert [row[:5] for row in rows] == [
        ["2026-11-29 12:00:30 UTC", "left", "plan", "claude/claude-sonnet-4-5", "subscription"],
        ["2026-11-29 12:00:00 UTC", "entered", "plan", "claude/claude-sonnet-4-5", "subscription"],
    ]
    assert rows[0][5].startswith("quota_exhausted ")
    assert rows[1][5] == "Entered on the subscription rung"
    html = response.content.decode()
    assert 'aria-labelledby="timeline-chart-title timeline-chart-desc"' in html
    assert "Every transition is listed in the table below the chart." in html


def test_since_and_until_filter_and_a_bad_one_is_named(client: Client) -> None:
    _transitions(6)
    signed_in(client, "olga", "viewer")

    ranged = client.get(URL + "&since=2026-11-29T12:00:02&until=2026-11-29T12:00:04")
    bad = client.get(URL + "&since=yesterday")

    assert [row[2] for row in _cells(ranged.content.decode())] == ["c-3", "c-2"]
    assert bad.status_code == 200
    assert "Since is not a date and time" in bad.content.decode()
    assert len(_cells(bad.content.decode())) == 6


def test_pages_of_500_link_to_the_older_ones(client: Client) -> None:
    _transitions(501)
    signed_in(client, "olga", "viewer")

    first = client.get(URL).content.decode()
    older = re.search(r'href="([^"]+)" rel="next"', first)
    assert older is not None
    second = client.get(older.group(1).replace("&amp;", "&")).content.decode()

    assert len(_cells(first)) == 500
    assert [row[2] for row in _cells(second)] == ["c-0"]
    assert 'rel="next"' not in second
    # The newest page follows the range live; an older one stays where it is.
    assert parse(first).by_id("timeline-table").attrs["hx-trigger"] == "every 5s"
    assert "hx-trigger" not in parse(second).by_id("timeline-table").attrs


def test_the_htmx_request_gets_the_fragment(client: Client) -> None:
    _transitions(2)
    signed_in(client, "olga", "viewer")

    response = client.get(URL, headers=htmx_headers("timeline-table"))

    html = response.content.decode()
    assert html.lstrip().startswith('<section id="timeline-table"')
    assert "<html" not in html
    assert len(_cells(html)) == 2


def test_a_bad_auto_id_is_a_404_and_signed_out_is_sent_to_sign_in(client: Client) -> None:
    assert client.get(URL).status_code == 302
    signed_in(client, "olga", "viewer")

    assert client.get("/pools/timeline/?auto_id=auto/premium").status_code == 404


def _queries(client: Client, url: str) -> int:
    assert client.get(url).status_code == 200
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return sum(1 for q in captured.captured_queries if not SESSION_OR_USER.search(q["sql"]))


@pytest.mark.parametrize("count", [5, 500])
def test_the_page_runs_five_queries_whatever_the_number_of_transitions(
    client: Client, count: int
) -> None:
    _transitions(count)
    signed_in(client, "olga", "viewer")

    # the viewer's role, the page of transitions and the auto ids with a timeline; the
    # lanes add two whatever the transitions: those from the range's start on (at most
    # LANES_MAX_TRANSITIONS) and the stored membership
    assert _queries(client, URL) == 5


# --- lanes, ranges and the past tense ---------------------------------------------------------


def _cooldown_world() -> None:
    """A plan in auto/subscription an hour before NOW, out for a 5 s cooldown at 11:30:00
    (recorded while it ran), back at 11:30:10."""
    make_connection("plan")
    make_candidate(connection_id="plan")
    hour_ago = NOW - timedelta(hours=1)
    half_hour_ago = NOW - timedelta(minutes=30)
    make_reading("plan", remaining_percent=60.0, now=hour_ago)
    decisions.record_published(now=hour_ago)
    make_reading("plan", remaining_percent=60.0, now=half_hour_ago)
    services.apply_event("plan", kind="rate_limited", now=half_hour_ago)
    decisions.record_published(now=half_hour_ago)
    decisions.record_published(now=half_hour_ago + timedelta(seconds=10))


SUBSCRIPTION = "/pools/timeline/?auto_id=auto/subscription"


def test_past_rows_read_in_the_past_tense_with_absolute_utc_times(client: Client) -> None:
    _cooldown_world()
    signed_in(client, "olga", "viewer")

    rows = _cells(client.get(SUBSCRIPTION + "&range=1h").content.decode())

    # Recorded as "Cooling down until 2026-11-29 11:30:05 UTC (5 s from now)".
    assert rows == [
        [
            "2026-11-29 11:30:10 UTC",
            "entered",
            "plan",
            "claude/claude-sonnet-4-5",
            "subscription",
            "Entered on the subscription rung",
        ],
        [
            "2026-11-29 11:30:00 UTC",
            "left",
            "plan",
            "claude/claude-sonnet-4-5",
            "subscription",
            "cooling_down Was cooling down until 2026-11-29 11:30:05 UTC",
        ],
        [
            "2026-11-29 11:00:00 UTC",
            "entered",
            "plan",
            "claude/claude-sonnet-4-5",
            "subscription",
            "Entered on the subscription rung",
        ],
    ]
    assert PoolTransition.objects.get(auto_id="auto/subscription", change="left").detail == (
        "Cooling down until 2026-11-29 11:30:05 UTC (5 s from now)"
    )


def test_a_lane_per_connection_on_a_time_axis_with_the_empty_span_shaded(client: Client) -> None:
    _cooldown_world()
    signed_in(client, "olga", "viewer")

    page = parse(client.get(SUBSCRIPTION + "&range=1h").content)

    chart = page.by_class("lanes")[0]
    assert page.by_id("timeline-chart-title").text == (
        "Connections of auto/subscription in the pool from 2026-11-29 11:00 to 2026-11-29 12:00 UTC"
    )
    assert page.by_id("timeline-chart-desc").text == (
        "One lane per connection, filled where the pool could send to it, shaded where the "
        "pool had no member. plan: in the pool 59 min 50 s of 1 h. The pool was empty once "
        "in this range, 10 s in all. Every transition is listed in the table below the chart."
    )
    assert [t.text for t in chart.by_class("lane-label")] == ["plan"]
    # x: 130 + seconds * 578 / 3600; the axis every 10 minutes, on the hour's tens.
    assert [(r.attrs["x"], r.attrs["width"]) for r in chart.by_class("lane-in")] == [
        ("130.0", "289.0"),
        ("420.6", "287.4"),
    ]
    assert [(r.attrs["x"], r.attrs["width"]) for r in chart.by_class("timeline-empty")] == [
        ("419.0", "1.6")
    ]
    assert [t.text for t in chart.by_class("tick-label")] == [
        "11:00",
        "11:10",
        "11:20",
        "11:30",
        "11:40",
        "11:50",
        "12:00",
    ]
    assert page.by_class("empty-summary")[0].text == (
        "The pool was empty once in this range, 10 s in all."
    )
    # Polled live: what the live region would say if the lane or the pool changed.
    declared = [
        (e.attrs["data-live-key"], e.attrs["data-live-state"], e.attrs["data-live-say"])
        for e in page.by_id("timeline-table").iter()
        if "data-live-key" in e.attrs
    ]
    assert declared == [
        ("member auto/subscription plan", "in", "plan is back in auto/subscription."),
        ("pool auto/subscription", "serving", "auto/subscription serves again."),
    ]
    assert [li.text for li in page.by_class("empty-spans")[0].by_tag("li")] == [
        "from 2026-11-29 11:30:00 UTC to 2026-11-29 11:30:10 UTC (10 s)"
    ]


def test_the_range_is_picked_in_the_url(client: Client) -> None:
    _cooldown_world()
    signed_in(client, "olga", "viewer")

    default = parse(client.get(SUBSCRIPTION).content)
    short = parse(client.get(SUBSCRIPTION + "&range=6h").content)
    bad = parse(client.get(SUBSCRIPTION + "&range=fortnight").content)
    older = parse(
        client.get(SUBSCRIPTION + "&since=2026-11-29T11:29:00&until=2026-11-29T11:31:00").content
    )

    picker = default.by_class("range-picker")[0]
    assert [(a.text, a.attrs.get("aria-current")) for a in picker.by_tag("a")] == [
        ("last hour", None),
        ("last 6 hours", None),
        ("last 24 hours", "true"),
        ("last 7 days", None),
        ("last 30 days", None),
    ]
    assert picker.by_tag("a")[0].attrs["href"] == (
        "/pools/timeline/?auto_id=auto/subscription&range=1h"
    )
    assert default.by_class("range-shown")[0].text == "From 2026-11-28 12:00:00 UTC to now."
    assert short.by_class("range-shown")[0].text == "From 2026-11-29 06:00:00 UTC to now."
    assert short.by_id("timeline-chart-desc").text.split(". ")[1] == (
        "plan: in the pool 59 min 50 s of 6 h"
    )
    assert [p.text for p in bad.by_class("notice-error")] == [
        "Range is one of 1h, 6h, 24h, 7d, 30d: the last 24 hours shown."
    ]
    # A custom range: two minutes around the cooldown, with no live polling (it is past).
    assert older.by_class("range-shown")[0].text == (
        "From 2026-11-29 11:29:00 UTC to 2026-11-29 11:31:00 UTC."
    )
    assert older.by_class("empty-spans")[0].text == (
        "from 2026-11-29 11:30:00 UTC to 2026-11-29 11:30:10 UTC (10 s)"
    )
    assert "hx-trigger" not in older.by_id("timeline-table").attrs
    assert default.by_id("timeline-table").attrs["hx-trigger"] == "every 5s"
