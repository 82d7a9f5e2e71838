"""The dashboard's markup for keyboards, screen readers and phones, at a pinned `now`:
a skip link, one heading outline, live regions that morph and announce through one
small live region, stable row ids, labelled phone cards and the chart's data table."""

from __future__ import annotations

from datetime import timedelta
from itertools import pairwise

import pytest
from django.test import Client

from omniroute_admin import dashboard
from tests.ladder.factories import NOW, make_connection, make_reading
from tests.pages import Element, parse
from tests.worlds import htmx_headers, seed_demo_world, signed_in

pytestmark = pytest.mark.django_db

PAGES = (
    "/",
    "/connections/",
    "/connections/claude-max-1/",
    "/pools/?auto_id=auto/thrifty",
    "/pools/timeline/?auto_id=auto/thrifty",
    "/spend/",
    "/catalog/",
    "/prices/",
    "/settings/",
    "/tokens/",
)
# The live parts: page, the partial that polls, and what its announcements are called.
LIVE = (
    ("/", "ladder-status", "Overview"),
    ("/connections/", "connections-table", "Connections"),
    ("/connections/claude-max-1/", "connection-status", "Connection"),
    ("/pools/?auto_id=auto/thrifty", "pool-table", "Pools"),
)


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


@pytest.fixture
def demo() -> None:
    seed_demo_world(NOW, history=False)


@pytest.fixture
def operator(client: Client) -> Client:
    return signed_in(client, "olga", "operator")


def _body(page: Element) -> Element:
    return page.by_tag("body")[0]


@pytest.mark.parametrize("url", PAGES)
def test_the_first_link_of_every_page_skips_to_the_main_content(
    demo: None, operator: Client, url: str
) -> None:
    page = parse(operator.get(url).content)

    first = _body(page).by_tag("a")[0]
    main = page.by_tag("main")[0]

    assert (first.attrs["href"], first.attrs["class"], first.text) == (
        "#main",
        "skip-link",
        "Skip to the content",
    )
    # tabindex -1: the skip link moves focus into main, so the next Tab starts there.
    assert (main.attrs["id"], main.attrs["tabindex"]) == ("main", "-1")


@pytest.mark.parametrize("url", PAGES)
def test_every_page_has_one_h1_and_no_heading_skips_a_level(
    demo: None, operator: Client, url: str
) -> None:
    page = parse(operator.get(url).content)

    levels = [int(e.tag[1]) for e in page.iter() if e.tag in ("h1", "h2", "h3", "h4")]

    assert levels.count(1) == 1
    assert levels[0] == 1
    assert [b for a, b in pairwise(levels) if b > a + 1] == []


def test_the_rung_cards_are_headed_below_their_section(demo: None, operator: Client) -> None:
    page = parse(operator.get("/").content)

    ladder = page.by_class("ladder")[0]

    assert [h.text for h in ladder.by_tag("h3")] == [
        "subscription",
        "keyless",
        "free",
        "cheap",
        "premium",
    ]
    assert ladder.by_tag("h2") == []


@pytest.mark.parametrize(("url", "target", "label"), LIVE)
def test_live_parts_morph_and_are_not_live_regions_themselves(
    demo: None, operator: Client, url: str, target: str, label: str
) -> None:
    full = parse(operator.get(url).content)
    fragment = parse(operator.get(url, headers=htmx_headers(target)).content)

    for document in (full, fragment):
        region = document.by_id(target)
        assert (region.attrs["hx-swap"], region.attrs["data-announce"]) == ("morph", label)
        assert [e.tag for e in region.iter() if "aria-live" in e.attrs] == []
    assert full.by_tag("body")[0].attrs["hx-ext"] == "morph"
    assert fragment.by_tag("html") == []


@pytest.mark.parametrize("url", PAGES)
def test_every_page_has_one_announcer_outside_the_live_parts(
    demo: None, operator: Client, url: str
) -> None:
    page = parse(operator.get(url).content)

    announcer = page.by_id("live-announcer")

    assert (announcer.attrs["role"], announcer.attrs["aria-live"], announcer.text) == (
        "status",
        "polite",
        "",
    )
    # Besides it, only the refresh button's notice speaks (it changes on a click, not a poll).
    spoken = [e.attrs.get("id") for e in page.iter() if "aria-live" in e.attrs]
    assert spoken == [*(["refresh-notice"] if url == "/connections/" else []), "live-announcer"]


def test_connection_rows_are_keyed_by_connection_id_and_declare_their_standing(
    demo: None, operator: Client
) -> None:
    page = parse(operator.get("/connections/").content)

    rows = page.by_id("connections-table").by_tag("tbody")[0].by_tag("tr")

    declared = [
        (
            r.attrs["id"],
            r.attrs["data-live-key"],
            r.attrs["data-live-state"],
            r.attrs["data-live-say"],
        )
        for r in rows
    ]
    assert declared[:3] == [
        ("row-anthropic-key", "connection anthropic-key", "in-play", "anthropic-key is in play."),
        ("row-claude-max-1", "connection claude-max-1", "in-play", "claude-max-1 is in play."),
        ("row-claude-max-2", "connection claude-max-2", "dropped-out", "claude-max-2 dropped out."),
    ]


def test_ages_that_move_on_every_poll_are_marked_volatile(demo: None, operator: Client) -> None:
    page = parse(operator.get("/connections/").content)

    row = page.by_id("row-claude-max-1")
    volatile = [e.text for e in row.iter() if "data-volatile" in e.attrs]

    assert volatile == ["since 2026-11-29 11:59:40 UTC", "2026-11-29 11:59:40 UTC"]


@pytest.mark.parametrize(
    ("url", "table_class"),
    [
        ("/connections/", "connections"),
        ("/pools/?auto_id=auto/thrifty", "excluded"),
        ("/catalog/", "catalog"),
        ("/prices/", "prices"),
    ],
)
def test_each_phone_card_cell_is_labelled_with_its_column(
    demo: None, operator: Client, url: str, table_class: str
) -> None:
    page = parse(operator.get(url).content)
    table = page.by_class(table_class)[0]
    # A header's name as read aloud: a sort mark (aria-hidden) is not part of it.
    headers = [
        th.text.removesuffix("".join(mark.text for mark in th.by_class("sort-mark"))).strip()
        for th in table.by_tag("thead")[0].by_tag("th")
    ]

    rows = [row.by_tag("td") for row in table.by_tag("tbody")[0].by_tag("tr")]
    labels = {tuple(cell.attrs.get("data-label") or "Actions" for cell in cells) for cells in rows}

    assert "phone-cards" in table.attrs["class"].split()
    assert labels == {tuple(headers)}


def test_the_chart_lists_its_readings_in_a_table_newest_first(client: Client) -> None:
    viewer = signed_in(client, "victor", "viewer")
    make_connection("claude-max-1")
    for minutes, remaining in ((300, 40.0), (200, 1.0), (50, 80.5)):
        make_reading(remaining_percent=remaining, now=NOW - timedelta(minutes=minutes))
    make_reading(remaining_percent=60.0, now=NOW - timedelta(hours=30))  # outside the day

    page = parse(viewer.get("/connections/claude-max-1/").content)

    data = page.by_class("chart-data")[0]
    assert data.by_tag("summary")[0].text == "The chart as a table: 3 readings, newest first"
    assert [
        [cell.text for cell in row.by_tag("td")] for row in data.by_tag("tbody")[0].by_tag("tr")
    ] == [
        ["2026-11-29 11:10:00", "80.5 %", "SAFE", "unknown", "push"],
        ["2026-11-29 08:40:00", "1.0 %", "SAFE", "unknown", "push"],
        ["2026-11-29 07:00:00", "40.0 %", "SAFE", "unknown", "push"],
    ]
    assert "The readings are listed in a table below the chart." in page.by_id("chart-desc").text
