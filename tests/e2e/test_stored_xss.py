"""Stored XSS, once in real Chromium: hostile text in a catalog reason, a connection label,
a provider name and a reported model name renders as text on every page, runs nothing
and adds no handler."""

from __future__ import annotations

from decimal import Decimal

import pytest
from playwright.sync_api import Dialog, Page
from pytest_django.live_server_helper import LiveServer

from billing.models import BillingCatalogEntry
from ladder import services
from tests.e2e.conftest import sign_in
from tests.ladder.factories import make_candidate
from tests.worlds import make_user

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PAYLOADS = (
    "<script>window.__xss = 'script'</script>",
    '"><img src=x onerror="window.__xss = \'img\'">',
    '<b hx-get="/tokens/" hx-trigger="load" hx-on:htmx:after-request="window.__xss = \'hx\'">x</b>',
    "<button hx-on:click=\"window.__xss = 'click'\">press</button>",
)


def test_hostile_text_renders_inert_in_chromium(page: Page, live_server: LiveServer) -> None:
    reason = " ".join(PAYLOADS)
    BillingCatalogEntry.objects.filter(provider="cursor").update(reason=reason)
    services.upsert_connection(
        "evil",
        services.ConnectionInput("cursor", "oauth", label=PAYLOADS[1] + PAYLOADS[3]),
    )
    make_candidate("cursor", PAYLOADS[0][:60], connection_id="evil", categories=("coding",))
    # A gateway's model name, shown by the spend page's breakdown.
    services.record_spend(
        services.SpendInput("xss-spend", "evil", "cursor", PAYLOADS[1], Decimal("1"))
    )
    make_user("olga", "operator")
    dialogs: list[str] = []

    def on_dialog(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    sign_in(page, live_server.url, "olga")

    for path in ("/", "/connections/", "/connections/evil/", "/pools/", "/catalog/", "/spend/"):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
        for button in page.locator("main button", has_text="press").all():
            button.click()

        assert page.evaluate("window.__xss") is None, path
        assert page.locator("main script").count() == 0, path
        assert page.locator("main img[src=x]").count() == 0, path
    page.goto(f"{live_server.url}/catalog/")
    assert "onerror=" in page.locator("main").inner_text()  # shown as text, not markup
    page.goto(f"{live_server.url}/spend/")
    assert "onerror=" in page.locator(".spend-by-model").inner_text()
    assert dialogs == []
