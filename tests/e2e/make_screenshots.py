"""Screenshots of the overview, connections and pools pages on the demo world, for
docs/screenshots/. Not collected by default; run it explicitly:

    .venv/bin/python -m pytest tests/e2e/make_screenshots.py -p no:cacheprovider
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import Page
from pytest_django.live_server_helper import LiveServer

from tests.e2e.conftest import sign_in
from tests.e2e.worlds import make_user, seed_demo_world

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
PAGES = (
    ("overview.png", "/"),
    ("connections.png", "/connections/"),
    ("pools.png", "/pools/?auto_id=auto/thrifty"),
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_make_screenshots(page: Page, live_server: LiveServer) -> None:
    seed_demo_world(timezone.now())
    make_user("demo-operator", "operator")
    sign_in(page, live_server.url, "demo-operator")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for name, path in PAGES:
        page.goto(f"{live_server.url}{path}")
        page.wait_for_selector(".updated time")
        page.screenshot(path=str(SCREENSHOTS / name), full_page=True)
        assert (SCREENSHOTS / name).stat().st_size > 10_000
