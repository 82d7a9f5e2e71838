"""Calm live updates, in real Chromium: a pause control stops the live parts' polls (and
says so once), remembers it across pages, and resumes them; polls say state changes only
(a pool emptying, a connection dropping out or coming back), never a counter, and rows
keep their heights while only ages and countdowns move; a poll of an unchanged part is a
304 on the wire that redraws nothing, and ages and countdowns tick in the browser."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect
from pytest_django.live_server_helper import LiveServer

from ladder import services
from tests.e2e.conftest import sign_in
from tests.e2e.test_focus import RECORD_ANNOUNCEMENTS
from tests.ladder.factories import make_reading
from tests.worlds import make_user, seed_demo_world

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# Counts the polls sent (settled) and the ones the pause held back (seen on window,
# after dashboard.js, listening on document, has held them back).
COUNT_POLLS = """() => {
  window.settled = 0; window.heldBack = 0;
  window.addEventListener("htmx:beforeRequest", (event) => {
    if (event.defaultPrevented) window.heldBack += 1;
  });
  document.body.addEventListener("htmx:afterSettle", (event) => {
    if (event.detail.target && event.detail.target.id === "connections-table") window.settled += 1;
  });
}"""


@pytest.fixture
def fast_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    from omniroute_admin import dashboard

    monkeypatch.setattr(dashboard, "POLL_SECONDS", 1)


def test_the_pause_control_holds_back_polls_until_resumed(
    fast_polls: None, page: Page, live_server: LiveServer
) -> None:
    seed_demo_world(timezone.now(), history=False)
    make_user("olga", "operator")
    sign_in(page, live_server.url, "olga")
    page.goto(f"{live_server.url}/connections/")
    page.evaluate(COUNT_POLLS)
    page.evaluate(RECORD_ANNOUNCEMENTS)
    pause = page.locator("#live-pause")
    expect(pause).to_have_text("Pause live updates")
    page.wait_for_function("() => window.settled >= 1")

    pause.click()

    expect(pause).to_have_attribute("aria-pressed", "true")
    expect(pause).to_have_text("Live updates paused: resume")
    settled = page.evaluate("() => window.settled")
    page.wait_for_function("() => window.heldBack >= 2")
    assert page.evaluate("() => window.settled") == settled
    assert page.evaluate("() => window.said") == ["Live updates paused."]

    # Remembered on the next page.
    page.goto(f"{live_server.url}/connections/")
    page.evaluate(COUNT_POLLS)
    expect(page.locator("#live-pause")).to_have_attribute("aria-pressed", "true")
    page.wait_for_function("() => window.heldBack >= 1")
    assert page.evaluate("() => window.settled") == 0

    page.locator("#live-pause").click()

    expect(page.locator("#live-pause")).to_have_attribute("aria-pressed", "false")
    page.wait_for_function("() => window.settled >= 1")


def test_a_page_without_live_parts_shows_no_pause_control(
    page: Page, live_server: LiveServer
) -> None:
    make_user("olga", "operator")
    sign_in(page, live_server.url, "olga")
    page.goto(f"{live_server.url}/catalog/")

    expect(page.locator("#live-pause")).to_be_hidden()


# Counts the completed refreshes of the region with this id.
COUNT_REFRESHES = """(id) => {
  window.refreshes = 0;
  document.body.addEventListener("htmx:afterSettle", (event) => {
    if (event.detail.target && event.detail.target.id === id) window.refreshes += 1;
  });
}"""


def _await_refreshes(page: Page, count: int) -> None:
    page.wait_for_function("(count) => window.refreshes >= count", arg=count)
    page.evaluate("() => { window.refreshes = 0; }")


def test_the_overview_says_a_pool_emptying_and_never_what_was_paid(
    fast_polls: None, page: Page, live_server: LiveServer
) -> None:
    seed_demo_world(timezone.now(), history=False)
    make_user("olga", "viewer")
    sign_in(page, live_server.url, "olga")
    page.goto(f"{live_server.url}/")
    page.evaluate(COUNT_REFRESHES, "ladder-status")
    page.evaluate(RECORD_ANNOUNCEMENTS)
    _await_refreshes(page, 1)

    # Spend lands: paid and saved move, the budgets' meters too; nothing is said.
    services.record_spend(
        services.SpendInput("calm-1", "openai-key", "openai", "gpt-4o-mini", Decimal("0.25")),
        now=timezone.now(),
    )
    _await_refreshes(page, 3)
    assert page.evaluate("() => window.said") == []

    # The one plan in auto/subscription runs out: the pool empties, said once.
    make_reading("claude-max-1", remaining_percent=0.5, now=timezone.now())
    page.wait_for_function("() => window.said.length > 0")
    _await_refreshes(page, 2)
    assert page.evaluate("() => window.said") == ["auto/subscription is empty."]


def test_the_pools_page_says_a_connection_leaving_and_coming_back(
    fast_polls: None, page: Page, live_server: LiveServer
) -> None:
    seed_demo_world(timezone.now(), history=False)
    make_user("olga", "viewer")
    sign_in(page, live_server.url, "olga")
    page.goto(f"{live_server.url}/pools/?auto_id=auto/thrifty")
    page.evaluate(COUNT_REFRESHES, "pool-table")
    page.evaluate(RECORD_ANNOUNCEMENTS)
    _await_refreshes(page, 2)
    assert page.evaluate("() => window.said") == []

    make_reading("claude-max-1", remaining_percent=0.5, now=timezone.now())
    page.wait_for_function("() => window.said.length > 0")
    make_reading("claude-max-1", remaining_percent=80.0, now=timezone.now())
    page.wait_for_function("() => window.said.length > 1")
    _await_refreshes(page, 2)

    # The connection first, then what follows from it (the pools it emptied; past three
    # sentences the rest is counted).
    assert page.evaluate("() => window.said") == [
        "claude-max-1 left auto/thrifty. auto/subscription is empty. "
        "auto/coding:subscription is empty. And 1 more change.",
        "claude-max-1 is back in auto/thrifty. auto/subscription serves again. "
        "auto/coding:subscription serves again. And 1 more change.",
    ]


@pytest.mark.parametrize("width", [1440, 390])
def test_rows_keep_their_heights_while_only_ages_and_countdowns_move(
    fast_polls: None, page: Page, live_server: LiveServer, width: int
) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    seed_demo_world(timezone.now(), history=False)
    make_user("olga", "operator")
    sign_in(page, live_server.url, "olga")
    heights = (
        "() => [...document.querySelectorAll('#connections-table tbody tr')]"
        ".map((r) => r.getBoundingClientRect().height)"
    )
    page.goto(f"{live_server.url}/connections/")
    page.evaluate(COUNT_REFRESHES, "connections-table")
    page.evaluate(RECORD_ANNOUNCEMENTS)
    _await_refreshes(page, 1)
    before = page.evaluate(heights)

    seen = []
    for _ in range(3):
        _await_refreshes(page, 1)
        seen.append(page.evaluate(heights))

    assert seen == [before] * 3
    assert page.evaluate("() => window.said") == []


class Wire:
    """What Chromium sent and received for one URL (its DevTools protocol: Playwright
    reports a 304 that the browser's cache revalidated as the 200 the page got)."""

    def __init__(self, page: Page, url: str) -> None:
        self.url = url
        self.urls: dict[str, str] = {}
        self.sent: dict[str, dict[str, str]] = {}
        self.answers: dict[str, tuple[int, str | None]] = {}
        self.order: list[str] = []
        session = page.context.new_cdp_session(page)
        session.on("Network.requestWillBeSent", self._will_send)
        session.on("Network.requestWillBeSentExtraInfo", self._sent_headers)
        session.on("Network.responseReceivedExtraInfo", self._status)
        session.send("Network.enable")

    def _will_send(self, event: dict[str, Any]) -> None:
        if event["request"]["url"] == self.url:
            self.urls[event["requestId"]] = event["request"]["url"]
            self.order.append(event["requestId"])

    def _sent_headers(self, event: dict[str, Any]) -> None:
        self.sent[event["requestId"]] = {k.lower(): v for k, v in event["headers"].items()}

    def _status(self, event: dict[str, Any]) -> None:
        headers = {k.lower(): v for k, v in event["headers"].items()}
        self.answers[event["requestId"]] = (event["statusCode"], headers.get("etag"))

    def polls(self) -> list[tuple[str | None, int, str | None]]:
        """Each answered poll (htmx's request) of the URL: the If-None-Match sent, the
        status on the wire and the ETag received."""
        return [
            (self.sent[key].get("if-none-match"), *self.answers[key])
            for key in self.order
            if key in self.answers and self.sent.get(key, {}).get("hx-request") == "true"
        ]


# Counts the changes to the region's nodes and text, but for what dashboard.js writes
# there itself (an instant's distance, the time of the last poll).
COUNT_REDRAWS = """(id) => {
  window.redraws = 0;
  const own = (node) => {
    const element = node.nodeType === 1 ? node : node.parentElement;
    return element && element.closest("time[data-relative], [data-polled-at]");
  };
  new MutationObserver((records) => {
    window.redraws += records.filter((record) => !own(record.target)).length;
  }).observe(document.getElementById(id), {childList: true, characterData: true, subtree: true});
}"""


@pytest.mark.parametrize(
    ("path", "poll", "region"),
    [
        ("/candidates/", "/candidates/?page=1", "candidates-table"),
        ("/connections/claude-max-1/", "/connections/claude-max-1/", "connection-status"),
    ],
)
def test_an_unchanged_poll_is_a_304_on_the_wire_and_redraws_nothing(
    fast_polls: None,
    page: Page,
    live_server: LiveServer,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    poll: str,
    region: str,
) -> None:
    from omniroute_admin import dashboard

    now = timezone.now()
    seed_demo_world(now, history=False)
    # The server's clock stands still: a chart's axis moving on a minute is a change.
    monkeypatch.setattr(dashboard, "current_time", lambda: now)
    make_user("olga", "operator")
    sign_in(page, live_server.url, "olga")
    wire = Wire(page, f"{live_server.url}{poll}")
    page.goto(f"{live_server.url}{path}")
    page.evaluate(COUNT_REFRESHES, region)
    page.evaluate(RECORD_ANNOUNCEMENTS)
    focused = page.locator(f"#{region} a").first
    focused.focus()
    # The first poll fills the browser's cache (the page itself was another answer).
    _await_refreshes(page, 1)
    page.evaluate(COUNT_REDRAWS, region)

    _await_refreshes(page, 2)

    polls = wire.polls()
    # The first poll's answer is kept (a 200 with its ETag); the next ones send that ETag
    # and are answered 304, with no body.
    kept = polls[0][2]
    assert kept is not None
    assert polls[0][1] == 200
    assert polls[1:3] == [(kept, 304, kept), (kept, 304, kept)]
    assert page.evaluate("() => window.redraws") == 0
    assert page.evaluate("() => window.said") == []
    expect(focused).to_be_focused()


# Counts the answers to the region's requests (htmx:afterRequest fires on the answer; a
# settle waits on a timer, which the page's paused clock holds).
COUNT_ANSWERS = """(id) => {
  window.answered = 0;
  document.body.addEventListener("htmx:afterRequest", (event) => {
    if (event.detail.target && event.detail.target.id === id) window.answered += 1;
  });
}"""


def test_ages_and_countdowns_tick_in_the_browser_and_a_poll_keeps_them(
    page: Page, live_server: LiveServer
) -> None:
    start = timezone.now().replace(microsecond=0)
    seed_demo_world(start, history=False)
    make_user("olga", "operator")
    sign_in(page, live_server.url, "olga")
    page.clock.install(time=start - timedelta(seconds=30))
    page.goto(f"{live_server.url}/connections/")
    page.evaluate(COUNT_ANSWERS, "connections-table")
    page.clock.pause_at(start)
    row = page.locator('tr[data-connection="claude-max-1"]')
    read = row.locator("td.reading time[data-relative]")
    resets = row.locator("td.quota time[data-relative]")
    cooling = page.locator('tr[data-connection="groq-key"] td.cooldown time[data-relative]')
    until = f"{start + timedelta(seconds=95):%H:%M:%S} UTC"
    expect(read).to_have_text("20 s ago")
    expect(resets).to_have_text("in 37 min")
    expect(cooling).to_have_text(f"{until} (in 1 min 35 s)")

    # A poll (every 5 s) answers while the clock moves: the words are the clock's.
    page.clock.run_for(5_000)
    page.wait_for_function("() => window.answered >= 1")
    expect(read).to_have_text("25 s ago")
    expect(resets).to_have_text("in 36 min 55 s")
    expect(cooling).to_have_text(f"{until} (in 1 min 30 s)")

    page.clock.fast_forward(100_000)
    expect(read).to_have_text("2 min 5 s ago")
    expect(resets).to_have_text("in 35 min 15 s")
    expect(cooling).to_have_text(f"{until} (10 s ago)")
