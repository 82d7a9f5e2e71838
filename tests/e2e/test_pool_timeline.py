"""The pool timeline page in real Chromium: with recorded transitions it lists them in
the past tense, its lanes are an image named by a title and a description that says
each connection's time in the pool and points to the table, the range picker and the
since filter swap the table in place and go in the URL, and axe finds nothing serious
in light and dark, as viewer and operator."""

from __future__ import annotations

from datetime import timedelta

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.utils import timezone
from playwright.sync_api import Page, expect
from pytest_django.live_server_helper import LiveServer

from ladder.services import decisions
from tests.e2e.conftest import sign_in
from tests.ladder.factories import make_reading
from tests.worlds import make_user, seed_demo_world

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize(("role", "color_scheme"), [("viewer", "light"), ("operator", "dark")])
def test_the_timeline_renders_its_transitions_with_a_text_alternative(
    page: Page, live_server: LiveServer, console_errors: list[str], role: str, color_scheme: str
) -> None:
    page.emulate_media(color_scheme=color_scheme)  # type: ignore[arg-type]
    now = timezone.now().replace(microsecond=0)
    seed_demo_world(now - timedelta(minutes=1), history=False)
    decisions.record_published(now=now - timedelta(minutes=1))
    make_reading("claude-max-1", remaining_percent=1.0, now=now)
    decisions.record_published(now=now)
    make_user("olga", role)
    sign_in(page, live_server.url, "olga")

    page.goto(f"{live_server.url}/pools/?auto_id=auto/subscription")
    page.get_by_role("link", name="Timeline: who entered or left, when and why").click()

    expect(page.get_by_role("heading", level=1)).to_have_text("Timeline of auto/subscription")
    chart = page.get_by_role("img", name="Connections of auto/subscription in the pool from")
    expect(chart).to_have_count(1)
    expect(chart.locator(".lane-label")).to_have_text(["claude-max-1"])
    described = chart.get_attribute("aria-labelledby") or ""
    assert "timeline-chart-desc" in described
    expect(page.locator("#timeline-chart-desc")).to_contain_text("claude-max-1: in the pool 1 min")
    expect(page.locator("#timeline-chart-desc")).to_contain_text(
        "listed in the table below the chart"
    )
    table = page.get_by_role("region", name="Transitions of auto/subscription")
    newest = table.locator("tbody tr").first
    expect(newest).to_contain_text("left")
    expect(newest).to_contain_text("claude-max-1")
    expect(newest).to_contain_text("quota_exhausted")
    rows = table.locator("tbody tr").count()
    assert rows >= 2

    # The range picker: the last hour, in the URL, the same transitions.
    page.get_by_role("navigation", name="Time range").get_by_role("link", name="last hour").click()
    expect(page.get_by_role("link", name="last hour")).to_have_attribute("aria-current", "true")
    assert "range=1h" in page.url
    expect(table.locator("tbody tr")).to_have_count(rows)

    # The since filter keeps only the latest instant's transitions, swapped in place.
    page.get_by_label("Since (UTC)").fill(now.strftime("%Y-%m-%dT%H:%M:%S"))
    page.get_by_role("button", name="Filter").click()
    expect(table.locator("tbody tr")).not_to_have_count(rows)
    expect(table.locator("tbody tr").first).to_contain_text("quota_exhausted")
    assert "since=" in page.url

    results = Axe().run(page)
    serious = [v for v in results.response["violations"] if v["impact"] in ("serious", "critical")]
    assert serious == []
    assert [e for e in console_errors if "Content Security Policy" in e] == []
