"""Every width, in real Chromium: no dashboard page scrolls sideways at 320, 390, 768,
1,024 or 1,440 px (tables scroll in their own box or become cards), and the navigation
stays one line whatever the width."""

from __future__ import annotations

import pytest
from django.utils import timezone
from playwright.sync_api import Browser
from pytest_django.live_server_helper import LiveServer

from ladder.models import Candidate
from ladder.services import decisions
from tests.e2e.conftest import sign_in
from tests.e2e.test_accessibility import PAGES
from tests.worlds import make_user, seed_demo_world

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

WIDTHS = (320, 390, 768, 1024, 1440)
MORE_PAGES = ("/aliases/", "/connections/groq-key/", "/audit/?q=settings")
# How far the page reaches beyond the window, and the nav's height in lines of links.
MEASURE = """() => {
  const links = [...document.querySelectorAll('#main-nav a')]
    .map(a => a.getBoundingClientRect().top);
  return {
    over: document.documentElement.scrollWidth - window.innerWidth,
    navLines: new Set(links.map(Math.round)).size,
  };
}"""


@pytest.mark.parametrize("role", ["operator", "viewer"])
def test_no_page_scrolls_sideways_at_any_width(
    browser: Browser, live_server: LiveServer, role: str
) -> None:
    now = timezone.now()
    seed_demo_world(now)
    decisions.record_published(now=now)
    make_user("olga", role)
    candidate = Candidate.objects.order_by("pk").first()
    assert candidate is not None
    paths = (*PAGES, *MORE_PAGES, f"/candidates/{candidate.pk}/")
    context = browser.new_context(viewport={"width": WIDTHS[0], "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        sign_in(page, live_server.url, "olga")
        found = {}
        for path in paths:
            page.goto(f"{live_server.url}{path}")
            for width in WIDTHS:
                page.set_viewport_size({"width": width, "height": 900})
                found[(path, width)] = page.evaluate(MEASURE)
    finally:
        context.close()

    too_wide = {key: f["over"] for key, f in found.items() if f["over"] > 0}
    wrapped = {key: f["navLines"] for key, f in found.items() if f["navLines"] != 1}
    assert too_wide == {}
    assert wrapped == {}
