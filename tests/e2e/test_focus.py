"""Focus follows the action, in real Chromium: after each action the keyboard is where
the operator needs it next (the first field of an edit form, the one-time secret's Copy
button, the saved row, the success or error message), and the live region says the
outcome exactly once. Connections are picked, not typed: an unknown connection id is
refused until "Keep as typed" is ticked."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect
from pytest_django.live_server_helper import LiveServer

from billing.models import BillingCatalogEntry
from ladder.models import ApiToken, Candidate, Webhook
from ladder.services import enqueue, simulations
from tests.e2e.conftest import sign_in
from tests.worlds import make_user, seed_demo_world

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

DESKTOP = {"width": 1440, "height": 900}
# Records every non-empty text the live region takes (the page's announcements).
RECORD_ANNOUNCEMENTS = """() => {
  window.said = [];
  const region = document.getElementById("live-announcer");
  new MutationObserver(() => {
    const text = region.textContent.trim();
    if (text) window.said.push(text);
  }).observe(region, {childList: true, characterData: true, subtree: true});
}"""
# Counts the completed swaps of the element with this id (awaited, never slept for).
COUNT_SWAPS = """(id) => {
  window.swaps = 0;
  document.body.addEventListener("htmx:afterSettle", (event) => {
    if (event.detail.target && event.detail.target.id === id) window.swaps += 1;
  });
}"""


@pytest.fixture
def operator_page(browser: Browser, live_server: LiveServer) -> Iterator[Page]:
    """The demo world, an operator signed in on a desktop-sized page."""
    seed_demo_world(timezone.now(), history=False)
    make_user("olga", "operator")
    context = browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    context.set_default_timeout(15_000)
    tab = context.new_page()
    sign_in(tab, live_server.url, "olga")
    yield tab
    context.close()


def _listen(page: Page) -> None:
    page.evaluate(RECORD_ANNOUNCEMENTS)


def _said(page: Page) -> list[str]:
    """The announcements so far, once the first has been made."""
    page.wait_for_function("() => window.said.length > 0")
    said: list[str] = page.evaluate("() => window.said")
    return said


def _focused_id(page: Page) -> str:
    return str(page.evaluate("() => document.activeElement.id"))


def test_edit_on_a_catalog_row_focuses_the_forms_first_field_and_save_returns_to_the_row(
    operator_page: Page, live_server: LiveServer
) -> None:
    page = operator_page
    entry = BillingCatalogEntry.objects.order_by("pk").first()
    assert entry is not None
    page.goto(f"{live_server.url}/catalog/")
    _listen(page)

    page.locator(f"#entry-{entry.pk}").get_by_role("link", name="Edit").click()

    expect(page.locator("#edit-provider")).to_be_focused()
    page.locator("#edit-reason").fill("Checked against the terms again.")
    page.locator("#edit-reason").press("Tab")
    page.get_by_role("button", name="Save", exact=True).click()

    expect(page.locator(f"#entry-{entry.pk}")).to_be_focused()
    assert _said(page) == [
        f"Saved {entry.provider}/{entry.auth_type or '*'} (version {entry.version + 1})."
    ]


def test_a_new_tokens_copy_button_takes_the_focus_and_the_creation_is_said_once(
    operator_page: Page, live_server: LiveServer
) -> None:
    page = operator_page
    page.goto(f"{live_server.url}/tokens/")
    _listen(page)

    page.get_by_label("Name").fill("ci-runner")
    page.get_by_role("button", name="Create token").click()

    expect(page.get_by_role("button", name="Copy")).to_be_focused()
    assert _said(page) == [
        "New gateway token “ci-runner”: copy it now, it is shown only this once."
    ]
    assert ApiToken.objects.filter(name="ci-runner").count() == 1


def test_adding_a_candidate_focuses_the_message_and_says_it_once(
    operator_page: Page, live_server: LiveServer
) -> None:
    page = operator_page
    page.goto(f"{live_server.url}/candidates/?connection=openai-key")
    page.evaluate(COUNT_SWAPS, "candidates-table")
    _listen(page)
    add = page.locator("#candidate-add")

    add.get_by_label("Model").fill("gpt-focus")
    add.get_by_role("button", name="Add candidate").click()

    added = page.locator("#candidate-add .notice")
    expect(added).to_be_focused()
    expect(added).to_have_text(re.compile(r"Added candidate \d+: openai/gpt-focus\."))
    # The table reloads because of the add: that reload says nothing more.
    page.wait_for_function("() => window.swaps >= 1")
    assert _said(page) == [
        f"Added candidate {Candidate.objects.get(model='gpt-focus').pk}: "
        "openai/gpt-focus. Open its page"
    ]


def test_the_candidate_form_refuses_an_unknown_connection_until_kept_as_typed(
    operator_page: Page, live_server: LiveServer
) -> None:
    page = operator_page
    page.goto(f"{live_server.url}/candidates/")
    page.locator("#candidate-add summary").click()
    _listen(page)
    add = page.locator("#candidate-add")
    # The registered connections are offered to pick from.
    offered = page.evaluate(
        "() => [...document.querySelectorAll('#registered-connections option')].map(o => o.value)"
    )
    assert "groq-key" in offered
    expect(add.get_by_label("Pinned connection")).to_have_attribute(
        "list", "registered-connections"
    )

    add.get_by_label("Provider").fill("groq")
    add.get_by_label("Model").fill("llama-typo")
    add.get_by_label("Pinned connection").fill("groq-kye")
    add.get_by_role("button", name="Add candidate").click()

    summary = page.locator("#candidate-add .error-summary")
    expect(summary).to_be_focused()
    message = (
        "No connection is registered as “groq-kye” (did you mean “groq-key”?). Pick a "
        "registered one, or tick “Keep as typed” to save it anyway."
    )
    expect(page.locator("#candidate-add .field-error")).to_have_text(message)
    assert _said(page) == [f"Nothing was saved: fix 1 field Pinned connection: {message}"]
    assert not Candidate.objects.filter(model="llama-typo").exists()

    page.evaluate("() => { window.said = []; }")
    add.get_by_label("Keep as typed").check()
    add.get_by_role("button", name="Add candidate").click()

    expect(page.locator("#candidate-add .notice")).to_be_focused()
    assert Candidate.objects.get(model="llama-typo").connection_id == "groq-kye"


def test_adding_and_testing_a_webhook_focus_the_message_and_say_it_once(
    operator_page: Page, live_server: LiveServer
) -> None:
    page = operator_page
    page.goto(f"{live_server.url}/notifications/")
    page.evaluate(COUNT_SWAPS, "delivery-log")
    _listen(page)
    form = page.locator("#webhook-table form.card")

    form.get_by_label("Name").fill("ops")
    form.get_by_label("URL").fill("https://93.184.216.34/hooks/omniroute")
    form.get_by_role("button", name="Add webhook").click()

    notice = page.locator("#webhook-table .notice")
    expect(notice).to_be_focused()
    said = _said(page)
    assert len(said) == 1
    assert said[0] == "Created webhook ops."

    webhook = Webhook.objects.get(name="ops")
    page.evaluate("() => { window.said = []; window.swaps = 0; }")
    page.locator(f"#webhook-{webhook.pk}").get_by_role("button", name="Send test").click()

    expect(notice).to_have_text("Test notification queued: the delivery log shows how it goes.")
    expect(notice).to_be_focused()
    page.wait_for_function("() => window.swaps >= 1")  # the log's reload says nothing
    assert _said(page) == ["Test notification queued: the delivery log shows how it goes."]


@pytest.fixture
def queued_simulation(
    monkeypatch: pytest.MonkeyPatch, settings: pytest.FixtureRequest, tmp_path: Path
) -> threading.Event:
    """Queued runs wait for the returned event, then run one short day in a thread."""
    settings.VAR_DIR = tmp_path  # type: ignore[attr-defined]
    release = threading.Event()

    def run(run_id: int) -> None:
        release.wait(10)
        try:
            simulations.run_simulation(run_id)
        finally:
            connection.close()

    monkeypatch.setattr(
        enqueue,
        "send_simulation",
        lambda run_id: threading.Thread(target=run, args=(run_id,), daemon=True).start(),
    )
    monkeypatch.setattr(simulations, "DASHBOARD_DAYS", 1)
    monkeypatch.setattr(simulations, "DASHBOARD_REQUESTS_PER_WEEKDAY", 50)
    return release


def test_running_a_simulation_focuses_its_status_and_says_it_once(
    operator_page: Page, live_server: LiveServer, queued_simulation: threading.Event
) -> None:
    page = operator_page
    page.goto(f"{live_server.url}/reports/simulation/")
    _listen(page)

    page.get_by_role("button", name="Run a simulation now").click()

    status = page.locator("#simulation-status")
    expect(status).to_be_focused()
    said = _said(page)
    queued_simulation.set()
    assert len(said) == 1
    assert re.fullmatch(r"Simulation \d+, started by olga .*waiting for a worker\.", said[0])
