"""The dashboard in real Chromium while the database hangs: the live parts keep what they
showed, the page's error box says the database is not answering, and both recover by
themselves once it answers again (omniroute_admin/deadline.py, static/dashboard.js)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections
from django.db.backends.signals import connection_created
from playwright.sync_api import Page, expect
from pytest_django.live_server_helper import LiveServer

from omniroute_admin import dashboard, deadline
from tests.e2e.conftest import sign_in
from tests.worlds import make_user

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

POLL_SECONDS = 1
# A hung query gives up after this long (so a regression fails instead of hanging).
HANG_LIMIT = 20.0


class HungDatabase:
    """From `hang()` on, every database connection opened (the dashboard threads' own:
    the pool is replaced, and closes its connections after each request) waits until
    `answer()` before running a query."""

    def __init__(self, settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.settings = settings
        self.monkeypatch = monkeypatch
        self.answering = threading.Event()
        self.answering.set()

    def _wait(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.answering.wait(HANG_LIMIT)
        return execute(sql, params, many, context)

    def _hook(self, sender: Any, connection: Any, **kwargs: Any) -> None:
        connection.execute_wrappers.append(self._wait)

    def hang(self) -> None:
        self.settings.DASHBOARD_REQUEST_DEADLINE_SECONDS = 0.5
        self.monkeypatch.setattr(deadline, "_dashboard_pool", None)
        self.monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
        self.answering.clear()
        connection_created.connect(self._hook)

    def answer(self) -> None:
        connection_created.disconnect(self._hook)
        self.answering.set()


@pytest.fixture
def database(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[HungDatabase]:
    hung = HungDatabase(settings, monkeypatch)
    yield hung
    hung.answer()


def test_a_hung_database_shows_in_the_error_box_and_the_overview_recovers_by_itself(
    page: Page,
    live_server: LiveServer,
    database: HungDatabase,
    monkeypatch: pytest.MonkeyPatch,
    console_errors: list[str],
) -> None:
    monkeypatch.setattr(dashboard, "POLL_SECONDS", POLL_SECONDS)
    make_user("olga", "operator")
    sign_in(page, live_server.url, "olga")
    status = page.locator("#ladder-status")
    error_box = page.locator("#request-error")
    expect(status).to_contain_text("auto/subscription")
    expect(error_box).to_be_hidden()

    database.hang()

    expect(error_box).to_have_text(
        f"The database is not answering. Live parts of this page retry every {POLL_SECONDS} s.",
        timeout=10_000,
    )
    expect(error_box).to_be_visible()
    # The polled part was not replaced by the error: it still shows the last ladder.
    expect(status).to_contain_text("auto/subscription")

    database.answer()

    expect(error_box).to_be_hidden(timeout=10_000)
    expect(status).to_contain_text("auto/subscription")
    assert [e for e in console_errors if "Content Security Policy" in e] == []
