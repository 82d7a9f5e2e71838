"""Forecasts in real Chromium: the forecast line on a connection's chart has a text
alternative (the chart's accessible description), the overview's forecast sentence is a
link a keyboard reaches and a screen reader reads whole, and both pages hold at phone
width."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect
from pytest_django.live_server_helper import LiveServer

from ladder import services
from tests.e2e.conftest import sign_in
from tests.worlds import make_user, seed_demo_world

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
SENTENCE = re.compile(r"^Claude Max \(team\) runs out in about \d+ min, \d+ min before its reset;")


@pytest.fixture
def world() -> None:
    """The demo world, with claude-max-1 burning fast inside its current window: 82 %,
    73 % and (the demo's current reading) 64 %, all resetting in 37 minutes."""
    now = timezone.now()
    seed_demo_world(now)
    for ago, left in ((360, 82.0), (180, 73.0)):
        services.store_reading(
            "claude-max-1",
            services.ReadingInput(
                remaining_percent=left,
                reset_at=now + timedelta(minutes=37),
                checked_at=now - timedelta(seconds=ago),
                source="simulated",
            ),
            now=now,
        )
    make_user("olga", "viewer")


@pytest.fixture
def phone(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport=PHONE)  # type: ignore[arg-type]
    context.set_default_timeout(15_000)
    yield context.new_page()
    context.close()


def test_the_forecast_line_on_the_chart_has_a_text_alternative(
    world: None, page: Page, live_server: LiveServer
) -> None:
    sign_in(page, live_server.url, "olga")
    page.goto(f"{live_server.url}/connections/claude-max-1/")

    chart = page.locator("svg.chart")
    line = chart.locator("path.chart-forecast")
    expect(line).to_have_count(1)
    expect(line.locator("title")).to_have_text(
        re.compile(r"^Forecast: from 64\.0 % at \d\d:\d\d UTC to the exit cutoff \(2\.0 %\) at ")
    )
    expect(chart.locator("line.chart-reset title")).to_have_text(re.compile(r"^Reset at "))
    # The drawing is described by the forecast in words, which is on the page as text.
    expect(chart).to_have_accessible_description(
        re.compile(r"^Forecast: Claude Max \(team\) runs out in about \d+ min, \d+ min before")
    )
    words = page.locator("#chart-forecast-text")
    expect(words).to_be_visible()
    expect(words).to_contain_text("The dashed line: Forecast: from 64.0 %")
    expect(words).to_contain_text("Reset at ")


def test_the_overview_forecast_sentence_is_reachable_by_keyboard_and_named_whole(
    world: None, page: Page, live_server: LiveServer
) -> None:
    sign_in(page, live_server.url, "olga")
    page.goto(f"{live_server.url}/")
    sentence = page.get_by_role("list", name="What happens next").get_by_role("link", name=SENTENCE)
    expect(sentence).to_have_count(1)

    # Past the skip link, the navigation and the other plans' sentences (soonest first).
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate(
            "() => document.activeElement.textContent.startsWith('Claude Max (team)')"
        ):
            break

    expect(sentence).to_be_focused()
    expect(sentence).to_be_in_viewport()
    expect(page.get_by_role("heading", name="What happens next")).to_be_visible()
    sentence.press("Enter")
    page.wait_for_url(re.compile(r"/connections/claude-max-1/$"))


@pytest.mark.parametrize("path", ["/", "/connections/claude-max-1/"])
def test_the_forecast_pages_hold_at_phone_width(
    world: None, phone: Page, live_server: LiveServer, path: str
) -> None:
    sign_in(phone, live_server.url, "olga")
    phone.goto(f"{live_server.url}{path}")

    expect(phone.locator(".forecast-sentence, #chart-forecast-text").first).to_be_visible()
    width = phone.evaluate(
        "() => ({scroll: document.documentElement.scrollWidth, inner: window.innerWidth})"
    )
    assert width == {"scroll": 390, "inner": 390}
