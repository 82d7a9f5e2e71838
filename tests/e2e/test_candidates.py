"""Candidates in real Chromium: a candidate created in the dashboard appears in the
pools page's entries; the candidates matrix, with a rung closed as a whole, is clean
under axe in light and dark, for operators and viewers, on a desktop and a phone."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect
from pytest_django.live_server_helper import LiveServer

from ladder import services
from ladder.models import Candidate, LadderSettings
from tests.e2e.conftest import sign_in
from tests.e2e.test_accessibility import DESKTOP, PHONE, _page, _serious_violations
from tests.worlds import make_user, seed_demo_world

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_candidate_created_in_the_dashboard_appears_in_the_pool_entries(
    page: Page, live_server: LiveServer, console_errors: list[str]
) -> None:
    seed_demo_world(timezone.now(), history=False)
    make_user("olga", "operator")
    sign_in(page, live_server.url, "olga")

    page.goto(f"{live_server.url}/candidates/?connection=openai-key")
    add = page.locator("#candidate-add")
    expect(add.get_by_label("Pinned connection")).to_have_value("openai-key")
    expect(add.get_by_label("Provider")).to_have_value("openai")
    add.get_by_label("Model").fill("gpt-e2e-model")
    add.get_by_label("Categories").fill("e2e")
    add.get_by_role("button", name="Add candidate").click()

    expect(page.locator("#candidate-add .notice")).to_have_text(
        re.compile(r"Added candidate \d+: openai/gpt-e2e-model\. Open its page")
    )
    added = Candidate.objects.get(model="gpt-e2e-model")
    assert (added.connection_id, added.categories) == ("openai-key", ["e2e"])
    # The table reloads at once (the add tells it to), with the new row and its pools.
    row = page.locator(f"#candidate-{added.pk}")
    expect(row.locator('td[data-label="auto/e2e:thrifty"]')).to_have_text("in premium")

    page.goto(f"{live_server.url}/pools/?auto_id=auto/e2e:thrifty")
    entries = page.locator(".pool-entries li")
    expect(entries).to_have_count(1)
    expect(entries.first).to_have_text(re.compile(r"openai/gpt-e2e-model\s+via\s+openai-key"))
    page.goto(f"{live_server.url}/pools/?auto_id=auto/thrifty")
    expect(page.locator(".pool-entries li", has_text="openai/gpt-e2e-model")).to_have_count(1)
    # The new candidate's own page: where it lands, with no serious accessibility issue.
    page.goto(f"{live_server.url}/candidates/{added.pk}/")
    # A metered key: in both thrifty pools, left out of both subscription pools.
    expect(page.locator("#candidate-status .placement-in")).to_have_count(2)
    expect(page.locator("#candidate-status .placement-out")).to_have_count(2)
    assert _serious_violations(page) == []
    assert [e for e in console_errors if "Content Security Policy" in e] == []


@pytest.mark.parametrize(
    ("role", "color_scheme", "viewport"),
    [
        ("operator", "light", DESKTOP),
        ("viewer", "dark", DESKTOP),
        ("operator", "dark", PHONE),
        ("viewer", "light", PHONE),
    ],
    ids=["operator-light", "viewer-dark", "operator-dark-phone", "viewer-light-phone"],
)
def test_a_closed_rung_is_named_once_on_the_matrix_and_the_overview_and_passes_axe(
    browser: Browser,
    live_server: LiveServer,
    role: str,
    color_scheme: str,
    viewport: dict[str, int],
) -> None:
    seed_demo_world(timezone.now(), history=False)
    # A cheap budget of 0 closes the cheap rung: said once, above the table.
    LadderSettings.objects.filter(pk=1).update(cheap_budget_usd=0)
    services.clear_caches()  # a row written behind the services' back: no counter moved
    make_user("someone", role)
    page = _page(browser, viewport, color_scheme)
    try:
        sign_in(page, live_server.url, "someone")
        page.goto(f"{live_server.url}/candidates/")
        expect(page.locator(".rung-note")).to_have_count(1)
        expect(page.locator("#rung-cheap")).to_contain_text(
            "cheap rung closed for every candidate on it, in every pool: rung_disabled"
        )
        mini = page.locator("tr", has=page.get_by_role("link", name="openai/gpt-4o-mini"))
        expect(mini.locator('td[data-label="auto/subscription"]')).to_have_text(
            "out by design metered"
        )
        expect(mini.locator('td[data-label="auto/thrifty"]')).to_have_text("out cheap rung closed")
        assert page.evaluate("() => document.documentElement.scrollWidth") <= viewport["width"]
        assert _serious_violations(page) == []
        # The overview's cheap card says it once too.
        page.goto(f"{live_server.url}/")
        expect(page.locator(".rung-closed")).to_have_count(1)
        assert _serious_violations(page) == []
    finally:
        page.context.close()
