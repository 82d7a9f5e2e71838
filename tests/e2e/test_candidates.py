"""Candidates in real Chromium: a candidate created in the dashboard appears in the
pools page's entries."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect
from pytest_django.live_server_helper import LiveServer

from ladder.models import Candidate
from tests.e2e.conftest import sign_in
from tests.e2e.test_accessibility import _serious_violations
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
    expect(row).to_contain_text("auto/e2e:thrifty")

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
