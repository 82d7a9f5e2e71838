"""The dashboard's "why" text for people: raw precision never shown (99.6 %, not
99.624754 %), and a stored hysteresis sentence said again under the current settings
on the connections list (full page and live fragment)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client

from ladder import services
from ladder.templatetags.citations import why_text
from omniroute_admin import dashboard
from tests.ladder.factories import NOW, make_candidate, make_connection, make_reading
from tests.pages import Element, parse
from tests.worlds import htmx_headers, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


@pytest.fixture
def viewer(client: Client) -> Client:
    make_connection("claude-max-1")
    make_reading(remaining_percent=1.0, now=NOW - timedelta(minutes=2))
    make_reading(remaining_percent=4.96, now=NOW)
    return signed_in(client, "victor", "viewer")


def _list_rows(viewer: Client) -> list[Element]:
    full = parse(viewer.get("/connections/").content)
    fragment = parse(viewer.get("/connections/", headers=htmx_headers("connections-table")).content)
    return [
        page.find_all(lambda e: e.attrs.get("data-connection") == "claude-max-1")[0]
        for page in (full, fragment)
    ]


def test_a_percent_beside_its_threshold_keeps_the_decimals_that_tell_the_side(
    viewer: Client,
) -> None:
    for row in _list_rows(viewer):
        # 4.96 % with a re-entry floor of 5 %: "5.0 % left" would contradict the state.
        assert row.by_class("remaining")[0].text == "4.96 % left"
        assert row.by_class("why")[0].text == (
            "1.0 % left, at or below the exit cutoff of 2 %; re-entry needs more than 5 %"
        )


def test_raw_precision_is_rounded_to_one_decimal(viewer: Client) -> None:
    make_reading(remaining_percent=99.624754, now=NOW)

    for row in _list_rows(viewer):
        assert row.by_class("remaining")[0].text == "99.6 % left"
        assert row.by_class("why")[0].text == "99.6 % left, above the re-entry floor of 5 %"
    page = parse(viewer.get("/connections/claude-max-1/").content)
    assert page.by_class("remaining")[0].text == "99.6 % left"


def test_a_stored_floor_under_new_settings_is_said_as_then_and_now(viewer: Client) -> None:
    values, _ = services.effective_settings_of(services.get_settings_row())
    services.update_settings({**values, "reentry_min_remaining_percent": 30.0}, actor="olga")

    for row in _list_rows(viewer):
        assert row.by_class("why")[0].text == (
            "1.0 % left, at or below the exit cutoff of 2 %; re-entry needs more than 30 %"
        )


def test_an_instant_in_a_reason_says_when_and_how_far_from_now(viewer: Client) -> None:
    make_candidate(connection_id="claude-max-1")
    make_reading(status="EXHAUSTED", remaining_percent=0.0, reset_at=NOW + timedelta(minutes=37))
    url = "/pools/?auto_id=auto/thrifty"

    for page in (
        parse(viewer.get(url).content),
        parse(viewer.get(url, headers=htmx_headers("pool-table")).content),
    ):
        (detail,) = [
            span
            for span in page.find_all(lambda e: "data-volatile" in e.attrs)
            if "EXHAUSTED" in span.text
        ]
        # The browser puts the distance after the instant: "... UTC (in 37 min)".
        assert detail.text == (
            "Upstream reports EXHAUSTED with 0.0 % left, until its reset at 2026-11-29 12:37:00 UTC"
        )
        assert [time.attrs for time in detail.by_tag("time")] == [
            {
                "datetime": "2026-11-29T12:37:00Z",
                "data-relative": "future",
                "data-absolute": "2026-11-29 12:37:00 UTC",
            }
        ]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "reset at 2026-11-29 12:37:00 UTC",
            'reset at <time datetime="2026-11-29T12:37:00Z" data-relative="future" '
            'data-absolute="2026-11-29 12:37:00 UTC">2026-11-29 12:37:00 UTC</time>',
        ),
        (
            "reset at 2026-11-29 11:57:00 UTC has passed",
            'reset at <time datetime="2026-11-29T11:57:00Z" data-relative="past" '
            'data-absolute="2026-11-29 11:57:00 UTC">2026-11-29 11:57:00 UTC</time> has passed',
        ),
        # The core's distance is the one of when it decided: the browser's replaces it.
        (
            "until 2026-11-29 12:01:35 UTC (95 s from now)",
            'until <time datetime="2026-11-29T12:01:35Z" data-relative="future" '
            'data-absolute="2026-11-29 12:01:35 UTC">2026-11-29 12:01:35 UTC</time>',
        ),
        # Another parenthesis after an instant already says something of it.
        (
            "from 2026-11-29 12:01:35 UTC (the last reading)",
            "from 2026-11-29 12:01:35 UTC (the last reading)",
        ),
        (
            "<b>catalog entry 4</b>",
            '&lt;b&gt;<a href="/catalog/#entry-4">catalog entry 4</a>&lt;/b&gt;',
        ),
    ],
)
def test_why_text_marks_each_instant_for_its_distance_and_links_entries(
    text: str, shown: str
) -> None:
    assert why_text(text, NOW) == shown
