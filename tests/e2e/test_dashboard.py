"""The dashboard in real Chromium: sign in, edit the catalog and watch the pool follow,
push a reading through the API and watch the connection move rungs without a reload,
and a viewer who sees no edit controls."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect
from pytest_django.live_server_helper import LiveServer

from billing.models import BillingCatalogEntry
from tests.e2e.conftest import sign_in
from tests.ladder.factories import make_token
from tests.worlds import make_user, seed_demo_world

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PRICE_FILE = Path(__file__).resolve().parents[1] / "billing" / "data" / "prices_small.json"
# Live parts poll every 5 s: give a change two polls to show.
LIVE_TIMEOUT_MS = 12_000


@pytest.fixture
def world() -> None:
    seed_demo_world(timezone.now(), history=False)


def _no_csp_violations(console_errors: list[str]) -> None:
    assert [error for error in console_errors if "Content Security Policy" in error] == []


def test_sign_in_shows_the_overview_with_user_and_role(
    world: None, page: Page, live_server: LiveServer, console_errors: list[str]
) -> None:
    make_user("olga", "operator")

    sign_in(page, live_server.url, "olga")

    expect(page.get_by_role("heading", name="The ladder at a glance")).to_be_visible()
    expect(page.locator(".who")).to_have_text(re.compile(r"olga\s+operator\s+Sign out"))
    expect(page.locator(".rung-card")).to_have_count(5)
    _no_csp_violations(console_errors)


def test_a_catalog_edit_changes_the_verdict_and_the_live_pool(
    world: None, page: Page, live_server: LiveServer, console_errors: list[str]
) -> None:
    make_user("olga", "operator")
    entry = BillingCatalogEntry.objects.get(provider="openai", auth_type=None)
    sign_in(page, live_server.url, "olga")
    pools = page.context.new_page()
    pools.goto(f"{live_server.url}/pools/?auto_id=auto/thrifty")
    first_rung = pools.locator(".pool-rung").first
    expect(first_rung).not_to_contain_text("openai-key")

    page.goto(f"{live_server.url}/catalog/")
    page.locator(f"#entry-{entry.pk}").get_by_role("link", name="Edit").click()
    page.locator("#edit-billing").select_option("subscription")
    page.locator("#edit-overage").select_option("hard-stop")
    page.get_by_role("button", name="Save").click()

    expect(page.locator("#catalog-table .notice")).to_have_text("Saved openai/* (version 2).")
    # The other tab's pool follows on its next poll: openai's key is now a plan.
    expect(first_rung).to_contain_text("openai/gpt-4o-mini via openai-key", timeout=LIVE_TIMEOUT_MS)
    page.goto(f"{live_server.url}/connections/")
    expect(page.locator('tr[data-connection="openai-key"] td.billing')).to_contain_text(
        "subscription"
    )
    _no_csp_violations(console_errors)


def test_a_pushed_reading_moves_the_connection_without_a_reload(
    world: None, page: Page, live_server: LiveServer, console_errors: list[str]
) -> None:
    make_user("olga", "operator")
    token = make_token()
    sign_in(page, live_server.url, "olga")
    page.goto(f"{live_server.url}/pools/?auto_id=auto/thrifty")
    excluded = page.locator("table.excluded")
    expect(page.locator(".pool-rung").first).to_contain_text("via claude-max-1")
    expect(excluded).not_to_contain_text("claude-max-1")
    page.evaluate("window.sameDocument = true")

    response = httpx.post(
        f"{live_server.url}/api/v1/connections/claude-max-1/readings",
        json={"remaining_percent": 1.0},
        headers={"Authorization": f"Bearer {token}"},
    )

    assert response.status_code == 201
    dropped = excluded.locator("tbody tr").filter(has_text="claude-max-1")
    expect(dropped).to_have_count(1, timeout=LIVE_TIMEOUT_MS)
    expect(dropped.locator("td").last).to_have_text(
        "quota_exhausted 1.0 % left, at or below the exit cutoff of 2 %"
    )
    expect(page.locator(".pool-rung").first).not_to_contain_text("via claude-max-1")
    assert page.evaluate("window.sameDocument") is True
    _no_csp_violations(console_errors)


def test_connection_row_drops_out_live_and_its_countdown_ticks(
    world: None, page: Page, live_server: LiveServer
) -> None:
    make_user("olga", "operator")
    token = make_token()
    sign_in(page, live_server.url, "olga")
    page.goto(f"{live_server.url}/connections/")
    row = page.locator('tr[data-connection="claude-max-1"]')
    countdown = row.locator("td.quota time[data-relative]")
    first = countdown.inner_text()
    page.wait_for_function(
        "([element, before]) => element.textContent !== before",
        arg=[countdown.element_handle(), first],
    )

    httpx.post(
        f"{live_server.url}/api/v1/connections/claude-max-1/readings",
        json={"status": "EXHAUSTED", "remaining_percent": 0.0},
        headers={"Authorization": f"Bearer {token}"},
    )

    expect(row.locator("td.hysteresis")).to_contain_text("dropped out", timeout=LIVE_TIMEOUT_MS)


def test_a_connection_with_nothing_to_poll_offers_the_push_request_not_refresh(
    world: None, page: Page, live_server: LiveServer, console_errors: list[str]
) -> None:
    make_user("olga", "operator")
    sign_in(page, live_server.url, "olga")
    page.goto(f"{live_server.url}/connections/")
    row = page.locator('tr[data-connection="groq-key"]')
    expect(row.get_by_role("button", name="Refresh now")).to_have_count(0)

    row.get_by_role("link", name="Push readings…").click()

    push = page.locator("#push-readings")
    expect(push.get_by_role("heading")).to_have_text("Readings must be pushed")
    expect(push.locator("pre")).to_contain_text(
        f'curl -X POST "{live_server.url}/api/v1/connections/groq-key/readings"'
    )
    _no_csp_violations(console_errors)


def test_a_viewer_sees_no_edit_controls(world: None, page: Page, live_server: LiveServer) -> None:
    make_user("victor", "viewer")
    sign_in(page, live_server.url, "victor")

    for path in ("/connections/", "/catalog/", "/prices/", "/settings/", "/tokens/"):
        page.goto(f"{live_server.url}{path}")
        expect(page.locator("main form[method=post]")).to_have_count(0)
        # Search and the live-updates pause (not an edit) are the only buttons a viewer has.
        buttons = page.locator("main button:not(#live-pause)")
        expect(buttons.filter(has_not_text="Search")).to_have_count(0)
        expect(page.get_by_role("link", name="Edit")).to_have_count(0)
    expect(page.locator(".who .role")).to_have_text("viewer")


def test_a_price_file_upload_reports_counts_and_refreshes_the_table(
    world: None, page: Page, live_server: LiveServer, console_errors: list[str]
) -> None:
    make_user("olga", "operator")
    sign_in(page, live_server.url, "olga")
    page.goto(f"{live_server.url}/prices/")
    expect(page.locator("#price-table tbody tr")).to_have_count(5)

    page.locator("#id_file").set_input_files(PRICE_FILE)
    page.locator("#id_provider_map").fill("anthropic=claude")
    page.get_by_role("button", name="Import").click()

    expect(page.locator("#price-import .notice-success")).to_have_text(
        "Imported: 0 created, 0 updated, 3 unchanged, 1 skipped (not chat models, or unpriced), "
        "0 invalid (malformed or out of range, not stored); 0 need review (imported zeros, "
        "counted as unpriced until confirmed)."
    )
    page.locator("#id_file").set_input_files(PRICE_FILE)
    page.locator("#id_provider_map").fill("anthropic=anthropic")
    page.get_by_role("button", name="Import").click()

    expect(page.locator("#price-import .notice-success")).to_contain_text("1 created")
    # The table hears the import's HX-Trigger and reloads itself.
    expect(page.locator("#price-table tbody tr")).to_have_count(6)
    _no_csp_violations(console_errors)
