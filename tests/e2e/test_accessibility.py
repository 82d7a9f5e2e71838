"""The dashboard for phones, keyboards and screen readers, in real Chromium: no page
scrolls sideways at 390 px, live refreshes keep the focused control and announce only
real changes, a skip link and visible focus, and axe-core finds nothing serious."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from axe_playwright_python.sync_playwright import Axe
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect
from pytest_django.live_server_helper import LiveServer

from billing.services import record_audit
from ladder.services import decisions
from tests.e2e.conftest import sign_in
from tests.ladder.factories import make_token
from tests.worlds import make_user, seed_demo_world

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1440, "height": 900}
# Every dashboard page, with the states that show the most (a chart, a fail-closed pool).
PAGES = (
    "/",
    "/connections/",
    "/connections/claude-max-1/",
    "/connections/?state=in-play&sort=-quota",
    "/connections/openai-key/",
    "/candidates/",
    "/candidates/?connection=openai-key",
    "/pools/?auto_id=auto/thrifty",
    "/pools/?auto_id=auto/subscription",
    "/pools/timeline/?auto_id=auto/thrifty",
    "/spend/",
    "/catalog/",
    "/prices/",
    "/settings/",
    "/tokens/",
    "/notifications/",
    "/reports/simulation/",
    "/audit/",
)
SERIOUS = ("serious", "critical")
# The page background of each scheme: proof that the emulated scheme took effect.
BACKGROUNDS = {"light": "rgb(244, 246, 250)", "dark": "rgb(14, 18, 24)"}
# Installed on the page by the tests (Playwright's evaluate is not subject to the CSP):
# counts the live region's completed refreshes, so tests await refreshes, not time.
COUNT_REFRESHES = """(id) => {
  window.refreshes = 0;
  document.body.addEventListener("htmx:afterSettle", (event) => {
    if (event.detail.target && event.detail.target.id === id) window.refreshes += 1;
  });
}"""


@pytest.fixture
def world() -> None:
    now = timezone.now()
    seed_demo_world(now)
    decisions.record_published(now=now)  # the pool timeline has rows to show
    # The audit page with a change of each shape: an update, a creation, a deletion.
    record_audit(
        target_type="settings",
        target_id=1,
        action="update",
        actor="olga",
        before={"exit_cutoff_percent": 2.0, "budget_window": "month"},
        after={"exit_cutoff_percent": 10.0, "budget_window": "week"},
    )
    record_audit(
        target_type="token",
        target_id=1,
        action="create",
        actor="olga",
        before=None,
        after={"name": "ci", "scope": "gateway", "prefix": "omr_abcdefgh", "revoked_at": None},
    )
    record_audit(
        target_type="price",
        target_id=99,
        action="delete",
        actor="token:ops",
        before={"provider": "openai", "model": "gpt-4o", "input_usd_per_mtok": "2.50"},
        after=None,
    )


@pytest.fixture
def fast_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Live parts poll every second instead of every 5 (the focus tests await three)."""
    from omniroute_admin import dashboard

    monkeypatch.setattr(dashboard, "POLL_SECONDS", 1)


def _page(browser: Browser, viewport: dict[str, int], color_scheme: Any = "light") -> Page:
    context = browser.new_context(viewport=viewport, color_scheme=color_scheme)  # type: ignore[arg-type]
    context.set_default_timeout(15_000)
    return context.new_page()


@pytest.fixture
def phone(browser: Browser) -> Iterator[Page]:
    tab = _page(browser, PHONE)
    yield tab
    tab.context.close()


@pytest.fixture
def desktop(browser: Browser) -> Iterator[Page]:
    tab = _page(browser, DESKTOP)
    yield tab
    tab.context.close()


def _width(page: Page) -> dict[str, int]:
    return page.evaluate(
        "() => ({scroll: document.documentElement.scrollWidth, inner: window.innerWidth})"
    )


# --- phone layout ------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["operator", "viewer"])
def test_no_dashboard_page_is_wider_than_a_phone(
    world: None, phone: Page, live_server: LiveServer, role: str
) -> None:
    make_user("olga", role)
    phone.goto(f"{live_server.url}/accounts/login/")
    widths = {"/accounts/login/": _width(phone)}
    sign_in(phone, live_server.url, "olga")

    for path in PAGES:
        phone.goto(f"{live_server.url}{path}")
        widths[path] = _width(phone)

    too_wide = {path: w for path, w in widths.items() if w["scroll"] > w["inner"]}
    assert too_wide == {}
    assert {w["inner"] for w in widths.values()} == {390}


def test_the_phone_nav_takes_one_line_and_shows_the_current_page(
    world: None, phone: Page, live_server: LiveServer
) -> None:
    make_user("olga", "operator")
    sign_in(phone, live_server.url, "olga")
    phone.goto(f"{live_server.url}/tokens/")

    header = phone.locator("header.top").bounding_box()
    current = phone.locator('.main-nav a[aria-current="page"]')

    assert header is not None
    # Brand and account on one line, the pages on a second one that scrolls on its own.
    assert header["height"] <= 0.12 * PHONE["height"]
    expect(current).to_have_text("API tokens")
    expect(current).to_be_in_viewport()


# --- live refreshes ----------------------------------------------------------------------


def _await_refreshes(page: Page, count: int) -> None:
    page.wait_for_function("(count) => window.refreshes >= count", arg=count)


def test_a_focused_refresh_button_keeps_focus_across_three_live_refreshes(
    world: None, fast_polls: None, desktop: Page, live_server: LiveServer
) -> None:
    make_user("olga", "operator")
    sign_in(desktop, live_server.url, "olga")
    desktop.goto(f"{live_server.url}/connections/")
    desktop.evaluate(COUNT_REFRESHES, "connections-table")
    row = desktop.locator('tr[data-connection="codex-plus"]')
    button = row.get_by_role("button", name="Refresh now")
    button.focus()
    desktop.evaluate("() => { document.activeElement.marked = 'yes'; }")
    scrolled = desktop.evaluate("() => { window.scrollTo(0, 120); return window.scrollY; }")

    _await_refreshes(desktop, 3)

    # The very element that had focus still has it (not a look-alike swapped in).
    assert desktop.evaluate("() => document.activeElement.marked") == "yes"
    expect(button).to_be_focused()
    assert desktop.evaluate("() => window.scrollY") == scrolled
    desktop.keyboard.press("Tab")
    expect(row.get_by_role("link", name="Edit…")).to_be_focused()


def test_a_half_typed_search_survives_live_refreshes(
    world: None, fast_polls: None, desktop: Page, live_server: LiveServer
) -> None:
    make_user("olga", "operator")
    sign_in(desktop, live_server.url, "olga")
    desktop.goto(f"{live_server.url}/connections/")
    desktop.evaluate(COUNT_REFRESHES, "connections-table")
    search = desktop.locator("#connection-search")
    search.press_sequentially("clau")

    _await_refreshes(desktop, 3)

    expect(search).to_be_focused()
    expect(search).to_have_value("clau")
    desktop.keyboard.type("de")
    expect(search).to_have_value("claude")


def test_a_focused_pool_tab_keeps_focus_across_three_live_refreshes(
    world: None, fast_polls: None, desktop: Page, live_server: LiveServer
) -> None:
    make_user("olga", "operator")
    sign_in(desktop, live_server.url, "olga")
    desktop.goto(f"{live_server.url}/pools/?auto_id=auto/thrifty")
    desktop.evaluate(COUNT_REFRESHES, "pool-table")
    tabs = desktop.locator("nav.tabs a")
    tabs.first.focus()
    desktop.evaluate("() => { document.activeElement.marked = 'yes'; }")

    _await_refreshes(desktop, 3)

    assert desktop.evaluate("() => document.activeElement.marked") == "yes"
    expect(tabs.first).to_be_focused()
    # groq-key's cooldown sentence counted down three times: not a change worth saying.
    expect(desktop.locator("table.excluded")).to_contain_text("groq-key")
    expect(desktop.locator("#live-announcer")).to_have_text("")
    desktop.keyboard.press("Tab")
    expect(tabs.nth(1)).to_be_focused()


def test_a_clicked_pool_tab_keeps_focus_and_later_refreshes_follow_it(
    world: None, fast_polls: None, desktop: Page, live_server: LiveServer
) -> None:
    make_user("olga", "operator")
    sign_in(desktop, live_server.url, "olga")
    desktop.goto(f"{live_server.url}/pools/?auto_id=auto/thrifty")
    desktop.evaluate(COUNT_REFRESHES, "pool-table")
    tab = desktop.locator("#tab-autosubscription")

    tab.click()
    expect(desktop.locator(".pool-head h2")).to_have_text("auto/subscription")
    desktop.evaluate("() => { window.refreshes = 0; }")
    _await_refreshes(desktop, 2)

    # The poll asks for the tab now shown, not the one the page was loaded with.
    expect(desktop.locator(".pool-head h2")).to_have_text("auto/subscription")
    expect(tab).to_be_focused()
    expect(tab).to_have_attribute("aria-current", "true")
    assert desktop.url.endswith("/pools/?auto_id=auto/subscription")
    # One poll loop, not one more per morph: about a second between refreshes.
    started = desktop.evaluate("() => performance.now()")
    _await_refreshes(desktop, 4)
    assert desktop.evaluate("() => performance.now()") - started > 1_200


def test_a_live_refresh_announces_only_a_real_change(
    world: None, fast_polls: None, desktop: Page, live_server: LiveServer
) -> None:
    make_user("olga", "operator")
    token = make_token()
    sign_in(desktop, live_server.url, "olga")
    desktop.goto(f"{live_server.url}/connections/")
    desktop.evaluate(COUNT_REFRESHES, "connections-table")
    announcer = desktop.locator("#live-announcer")
    # The region that polls is no live region itself: it would re-announce every poll.
    expect(desktop.locator("#connections-table")).not_to_have_attribute("aria-live", "polite")
    expect(announcer).to_have_attribute("aria-live", "polite")

    _await_refreshes(desktop, 3)
    # Ages and countdowns moved on three times; nothing else did: nothing is said.
    expect(announcer).to_have_text("")

    response = httpx.post(
        f"{live_server.url}/api/v1/connections/claude-max-1/readings",
        json={"status": "EXHAUSTED", "remaining_percent": 0.0},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 201

    # A state change is said, in words, not as "updated".
    expect(announcer).to_have_text("claude-max-1 dropped out.")


# --- keyboard ----------------------------------------------------------------------------


def test_the_first_tab_is_a_skip_link_to_the_main_content(
    world: None, desktop: Page, live_server: LiveServer
) -> None:
    make_user("olga", "operator")
    sign_in(desktop, live_server.url, "olga")
    desktop.goto(f"{live_server.url}/catalog/")

    desktop.keyboard.press("Tab")
    skip = desktop.get_by_role("link", name="Skip to the content")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    desktop.keyboard.press("Enter")
    desktop.keyboard.press("Tab")

    focused = desktop.evaluate("() => document.activeElement.closest('main') !== null")
    assert focused is True


def test_a_focused_control_shows_a_visible_outline(
    world: None, desktop: Page, live_server: LiveServer
) -> None:
    make_user("olga", "operator")
    sign_in(desktop, live_server.url, "olga")
    desktop.goto(f"{live_server.url}/connections/")
    desktop.locator("#connection-search").focus()  # keyboard-like focus for an input
    desktop.keyboard.press("Shift+Tab")
    desktop.keyboard.press("Tab")

    outline = desktop.evaluate(
        "() => { const s = getComputedStyle(document.activeElement);"
        " return [s.outlineStyle, parseFloat(s.outlineWidth)]; }"
    )

    assert outline[0] == "solid"
    assert outline[1] >= 2


# --- axe-core ----------------------------------------------------------------------------


def _serious_violations(page: Page) -> list[str]:
    results = Axe().run(page)
    return [
        f"{violation['id']} ({violation['impact']}): "
        + "; ".join(node["target"][0] for node in violation["nodes"][:5])
        for violation in results.response["violations"]
        if violation["impact"] in SERIOUS
    ]


@pytest.mark.parametrize(
    ("role", "color_scheme", "viewport"),
    [
        ("operator", "light", DESKTOP),
        ("viewer", "light", DESKTOP),
        ("operator", "dark", DESKTOP),
        ("viewer", "dark", PHONE),
    ],
    ids=["operator-light", "viewer-light", "operator-dark", "viewer-dark-phone"],
)
def test_axe_finds_no_serious_violation_on_any_page(
    world: None,
    browser: Browser,
    live_server: LiveServer,
    role: str,
    color_scheme: str,
    viewport: dict[str, int],
) -> None:
    make_user("someone", role)
    page = _page(browser, viewport, color_scheme)
    try:
        page.goto(f"{live_server.url}/accounts/login/")
        background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
        found = {"/accounts/login/": _serious_violations(page)}
        sign_in(page, live_server.url, "someone")
        for path in PAGES:
            page.goto(f"{live_server.url}{path}")
            found[path] = _serious_violations(page)
    finally:
        page.context.close()

    assert background == BACKGROUNDS[color_scheme]
    assert {path: violations for path, violations in found.items() if violations} == {}
