"""The pool timeline page (ladder/web/timeline.py): the table of transitions, since/until,
pages of 500, the HTMX fragment, and a query count that does not grow with the rows."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

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


def test_the_page_lists_the_recorded_transitions_newest_first(client: Client) -> None:
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
        ["2026-11-29 12:00:30", "left", "plan", "claude/claude-sonnet-4-5", "subscription"],
        ["2026-11-29 12:00:00", "entered", "plan", "claude/claude-sonnet-4-5", "subscription"],
    ]
    assert rows[0][5].startswith("quota_exhausted ")
    assert rows[1][5] == "In the pool on the subscription rung"
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
def test_the_page_runs_three_queries_whatever_the_number_of_transitions(
    client: Client, count: int
) -> None:
    _transitions(count)
    signed_in(client, "olga", "viewer")

    # the viewer's role, the page of transitions and the auto ids with a timeline
    assert _queries(client, URL) == 3
