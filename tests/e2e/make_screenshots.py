"""Screenshots of the overview, connections and pools pages on the demo world, for
docs/screenshots/: desktop (1440x900, the whole page) and phone (390x844, the first
screen), in the light scheme. Not collected by default; run it explicitly:

    .venv/bin/python -m pytest tests/e2e/make_screenshots.py -p no:cacheprovider

SCREENSHOTS_DIR=/some/dir writes there instead, and SCREENSHOTS_ALL=1 takes every
dashboard page in both schemes (for looking at them, not for the docs).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import Browser
from pytest_django.live_server_helper import LiveServer

from tests.e2e.conftest import sign_in
from tests.worlds import make_user, seed_demo_world

SCREENSHOTS = Path(
    os.environ.get("SCREENSHOTS_DIR")
    or Path(__file__).resolve().parents[2] / "docs" / "screenshots"
)
PAGES = (
    ("overview", "/"),
    ("connections", "/connections/"),
    ("pools", "/pools/?auto_id=auto/thrifty"),
)
EVERY_PAGE = (
    *PAGES,
    ("connection", "/connections/claude-max-1/"),
    ("pools-subscription", "/pools/?auto_id=auto/subscription"),
    ("catalog", "/catalog/"),
    ("prices", "/prices/"),
    ("settings", "/settings/"),
    ("tokens", "/tokens/"),
    ("spend", "/spend/"),
    ("timeline", "/pools/timeline/?auto_id=auto/thrifty"),
)
# name suffix, viewport, full page (a phone shows its first screen: what one sees on opening)
SIZES = (
    ("", {"width": 1440, "height": 900}, True),
    ("-phone", {"width": 390, "height": 844}, False),
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_make_screenshots(browser: Browser, live_server: LiveServer) -> None:
    seed_demo_world(timezone.now())
    make_user("demo-operator", "operator")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    every = os.environ.get("SCREENSHOTS_ALL") == "1"
    schemes = ("light", "dark") if every else ("light",)
    for scheme in schemes:
        for suffix, viewport, full_page in SIZES:
            context = browser.new_context(viewport=viewport, color_scheme=scheme)  # type: ignore[arg-type]
            page = context.new_page()
            sign_in(page, live_server.url, "demo-operator")
            for name, path in EVERY_PAGE if every else PAGES:
                page.goto(f"{live_server.url}{path}")
                page.wait_for_selector("main h1")
                file = SCREENSHOTS / f"{name}{suffix}{'-dark' if scheme == 'dark' else ''}.png"
                page.screenshot(path=str(file), full_page=full_page)
                assert file.stat().st_size > 10_000
            context.close()
