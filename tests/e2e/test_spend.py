"""The spend and savings page in real Chromium, on the hand-checked ledger: reached from
the navigation, its charts are images named by a title and a description that point to
the table beside them, the table and the breakdown carry the ledger's numbers, the
previous window's breakdown swaps in place, the CSV downloads, and axe finds nothing
serious."""

from __future__ import annotations

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect
from pytest_django.live_server_helper import LiveServer

from omniroute_admin import dashboard
from tests.e2e.conftest import sign_in
from tests.e2e.test_focus import RECORD_ANNOUNCEMENTS
from tests.ladder.factories import NOW
from tests.ladder.spend_ledger import write_ledger
from tests.worlds import make_user

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    # The live server runs in this process: its dashboard reads this clock too.
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


def test_the_spend_page_renders_the_ledger_with_text_alternatives(
    page: Page, live_server: LiveServer, console_errors: list[str]
) -> None:
    write_ledger()
    make_user("olga", "viewer")
    sign_in(page, live_server.url, "olga")

    page.get_by_role("navigation", name="Dashboard").get_by_role("link", name="Spend").click()

    expect(page.get_by_role("heading", level=1)).to_have_text("Spend & savings")
    expect(page.locator("#spend-headline")).to_have_text(
        "This month: paid 6.00 USD, saved 4.80 USD. Last month: paid 2.00 USD, saved 6.00 USD."
    )
    paid = page.get_by_role("img", name="Paid spend per UTC day, last month and this month")
    saved = page.get_by_role("img", name="Saved by the plans per UTC day")
    expect(paid).to_have_count(1)
    expect(saved).to_have_count(1)
    expect(paid).to_be_visible()
    assert "paid-chart-desc" in (paid.get_attribute("aria-labelledby") or "")
    expect(page.locator("#paid-chart-desc")).to_contain_text(
        'Every day\'s numbers are in the table "Spend and savings per day"'
    )
    expect(paid.locator("g.spend-day")).to_have_count(60)

    table = page.get_by_role("region", name="Spend and savings per day")
    expect(table).to_be_visible()
    newest = table.get_by_role("row", name="2026-11-28")
    expect(newest.get_by_role("cell")).to_have_text(["0.75", "4.00", "4.75", "0.30"])
    expect(table.get_by_role("row", name="Total this month").get_by_role("cell")).to_have_text(
        ["2.00", "4.00", "6.00", "4.80"]
    )

    by_connection = page.get_by_role("region", name="By connection, this month")
    expect(by_connection.locator("tbody tr").first).to_contain_text("plan")
    expect(by_connection.locator("tbody tr")).to_have_count(4)

    # The previous window's breakdown swaps in place, its URL is kept, the focus moves to
    # the period's totals and they are said once.
    page.evaluate(RECORD_ANNOUNCEMENTS)
    page.get_by_role("link", name="Last month", exact=True).click()
    previous = page.get_by_role("region", name="By connection, last month")
    expect(previous.locator("tbody tr")).to_have_count(2)
    assert "period=last" in page.url
    expect(page.locator("#period-totals")).to_be_focused()
    page.wait_for_function("() => window.said.length > 0")
    assert page.evaluate("() => window.said") == [
        "Last month, 2026-10-01 to 2026-10-31: paid 2.00 USD, saved 6.00 USD. "
        "Cheap 2.00 USD, premium 0.00 USD."
    ]

    with page.expect_download() as download:
        page.get_by_role("link", name="These entries as CSV").click()
    with open(download.value.path(), "rb") as exported:
        lines = exported.read().split(b"\r\n")
    assert download.value.suggested_filename == "spend-20261129T120000Z.csv"
    assert [line.split(b",")[1] for line in lines[1:-1]] == [b"oct-cheap", b"oct-plan"]

    results = Axe().run(page)
    serious = [v for v in results.response["violations"] if v["impact"] in ("serious", "critical")]
    assert serious == []
    assert [e for e in console_errors if "Content Security Policy" in e] == []
