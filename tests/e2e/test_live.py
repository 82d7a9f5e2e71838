"""Calm live updates, in real Chromium: a pause control stops the live parts' polls (and
says so once), remembers it across pages, and resumes them."""

from __future__ import annotations

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect
from pytest_django.live_server_helper import LiveServer

from tests.e2e.conftest import sign_in
from tests.e2e.test_focus import RECORD_ANNOUNCEMENTS
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
