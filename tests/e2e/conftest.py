"""Browser tests: real Chromium (Debian's, at /usr/bin/chromium) driven by Playwright
against pytest-django's live server."""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright

from ladder.services import enqueue
from tests.worlds import PASSWORD

ASYNC_UNSAFE = "DJANGO_ALLOW_ASYNC_UNSAFE"

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


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One Chromium per test module. Missing Chromium fails in CI and skips locally.

    Playwright's sync API keeps an event loop running in this thread, and Django refuses
    sync database calls while one runs; the tests and the live server are sync code, so
    DJANGO_ALLOW_ASYNC_UNSAFE is set while Playwright runs, and only then (it must not
    leak into later tests, such as `manage.py check --deploy` in a subprocess)."""
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing: install Debian's chromium package."
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    previous = os.environ.get(ASYNC_UNSAFE)
    os.environ[ASYNC_UNSAFE] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            yield chromium
            chromium.close()
    finally:
        if previous is None:
            os.environ.pop(ASYNC_UNSAFE, None)
        else:
            os.environ[ASYNC_UNSAFE] = previous


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
    row): browser tests need committed data, so they flush the database after each test.
    (pytest-django's serialized rollback did not restore reliably here: on PostgreSQL,
    after other tests had opened the connection, the restore never reached it.)"""
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

    monkeypatch.setattr(enqueue, "schedule_refresh_at", lambda *args, **kwargs: None)


def sign_in(page: Page, base_url: str, username: str) -> None:
    """Sign in through the login form and land on the overview."""
    page.goto(f"{base_url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/$"))
