"""Browser tests: real Chromium (Debian's, at /usr/bin/chromium) driven by Playwright
against pytest-django's live server."""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

# Playwright's sync API runs an event loop in this thread, and Django refuses sync
# database calls from inside one; the test code and the live server are sync code.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright

from tests.e2e.worlds import PASSWORD

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1400, "height": 900}


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """One Chromium for the session. Missing Chromium fails in CI and skips locally."""
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing: install Debian's chromium package."
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def console_errors() -> list[str]:
    """Console errors of the page (a CSP violation shows up here)."""
    return []


@pytest.fixture
def page(browser: Browser, console_errors: list[str]) -> Iterator[Page]:
    """A fresh browser context and page per test."""
    context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    context.set_default_timeout(15_000)
    tab = context.new_page()

    def record(message: ConsoleMessage) -> None:
        if message.type == "error":
            console_errors.append(message.text)

    tab.on("console", record)
    yield tab
    context.close()


@pytest.fixture(autouse=True)
def _data_migrations(transactional_db: None) -> None:
    """Put back what the data migrations seed (roles, the curated catalog, the settings
    row). Browser tests flush the database after each test, and the serialized-rollback
    restore does not always reach the test's connection once Playwright's loop runs
    (seen on PostgreSQL after other tests had opened the connection first)."""
    from django.contrib.auth.models import Group

    from billing.models import BillingCatalogEntry
    from ladder.models import LadderSettings

    curated = importlib.import_module("billing.migrations.0002_seed_curated_catalog").CURATED
    for name in ("viewer", "operator"):
        Group.objects.get_or_create(name=name)
    for provider, auth_type, billing, overage, reason in curated:
        BillingCatalogEntry.objects.get_or_create(
            provider=provider,
            auth_type=auth_type,
            defaults={"billing": billing, "overage": overage, "reason": reason},
        )
    LadderSettings.objects.get_or_create(pk=1)


@pytest.fixture(autouse=True)
def _no_background_refresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Storing a reading schedules a refresh at its reset through the broker; the
    dashboard tests have no worker, so nothing is enqueued."""
    from ladder import tasks

    monkeypatch.setattr(tasks, "schedule_refresh_at", lambda *args, **kwargs: None)


def sign_in(page: Page, base_url: str, username: str) -> None:
    """Sign in through the login form and land on the overview."""
    page.goto(f"{base_url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/$"))
