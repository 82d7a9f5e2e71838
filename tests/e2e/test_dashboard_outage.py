"""The dashboard in real Chromium during outages. While the database hangs: the live parts
keep what they showed, the page's error box says the database is not answering, and both
recover by themselves once it answers again (omniroute_admin/deadline.py,
static/dashboard.js). While the worker is stopped: the overview's outage banner names it,
red while auto/subscription refuses the plans it cannot verify, and goes once a worker
runs the beat's heartbeat again (ladder/web/outage.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections
from django.db.backends.signals import connection_created
from playwright.sync_api import Page, expect
from pytest_django.live_server_helper import LiveServer

from ladder import beat
from omniroute_admin import dashboard, deadline
from omniroute_admin.celery import app as celery_app
from tests.e2e.conftest import sign_in
from tests.ladder.factories import NOW
from tests.test_ops import FakeBroker
from tests.worlds import make_user, seed_demo_world

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
        self.monkeypatch.setattr(deadline, "_pools", {})
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


def test_the_outage_banner_names_the_stopped_worker_in_red_and_goes_once_one_runs(
    page: Page,
    live_server: LiveServer,
    monkeypatch: pytest.MonkeyPatch,
    console_errors: list[str],
) -> None:
    monkeypatch.setattr(dashboard, "POLL_SECONDS", POLL_SECONDS)
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)
    monkeypatch.setattr(beat, "STARTED_AT", NOW - timedelta(hours=1))
    monkeypatch.setattr(celery_app, "connection_for_write", FakeBroker().connection_for_write)
    # The worker stopped 10 min ago (its last readings and heartbeat run); the beat still
    # sends the heartbeat.
    seed_demo_world(NOW - timedelta(minutes=10), history=False)
    beat.record_sent(NOW - timedelta(seconds=3))
    make_user("olga", "operator")
    sign_in(page, live_server.url, "olga")
    banner = page.locator("#outage")

    expect(banner).to_have_attribute("data-down", "worker")
    expect(banner).to_have_attribute("role", "alert")
    expect(banner).to_contain_text("Down: the worker. No worker has run a task for 10 min")
    expect(banner).to_contain_text(
        "auto/subscription refuses 3 plan connections meanwhile (claude-max-1, claude-max-2, "
        "codex-plus)"
    )
    # Red: the error colours (static/omniroute.css, --error-bg and --error), not the amber.
    colours = banner.evaluate(
        "e => [getComputedStyle(e).backgroundColor, getComputedStyle(e).color]"
    )
    assert colours == ["rgb(253, 236, 234)", "rgb(180, 35, 24)"]

    beat.record_heartbeat(NOW)  # a worker runs the heartbeat again

    expect(banner).to_have_count(0, timeout=10_000)
    assert console_errors == []
