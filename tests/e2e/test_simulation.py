"""The What-if page in real Chromium: an operator starts a simulation, the page follows
its progress and shows the new report in place, with no CSP error and no serious
accessibility issue. The worker is a thread of the test process running the same
service the Celery task runs (tests/integration runs it on a real worker)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone
from playwright.sync_api import Page, expect
from pytest_django.live_server_helper import LiveServer

from ladder.models import SimulationRun
from ladder.services import enqueue, simulations
from tests.e2e.conftest import sign_in
from tests.e2e.test_accessibility import _serious_violations
from tests.worlds import make_user, seed_demo_world

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def thread_worker(
    monkeypatch: pytest.MonkeyPatch, settings: pytest.FixtureRequest, tmp_path: Path
) -> threading.Event:
    """Queued runs are run by a thread, one short simulated day each, once the test
    sets the returned event."""
    settings.VAR_DIR = tmp_path  # type: ignore[attr-defined]  # no command report
    release = threading.Event()

    def run(run_id: int) -> None:
        release.wait(10)  # the page shows the queued run first
        try:
            simulations.run_simulation(run_id)
        finally:
            connection.close()

    def send(run_id: int) -> None:
        threading.Thread(target=run, args=(run_id,), daemon=True).start()

    monkeypatch.setattr(enqueue, "send_simulation", send)
    monkeypatch.setattr(simulations, "DASHBOARD_DAYS", 1)
    monkeypatch.setattr(simulations, "DASHBOARD_REQUESTS_PER_WEEKDAY", 200)
    return release


def test_an_operator_runs_a_simulation_and_the_report_appears_in_place(
    page: Page, live_server: LiveServer, console_errors: list[str], thread_worker: threading.Event
) -> None:
    seed_demo_world(timezone.now(), history=False)
    make_user("olga", "operator")
    sign_in(page, live_server.url, "olga")

    page.goto(f"{live_server.url}/reports/simulation/")
    expect(page.locator("#report-origin")).to_contain_text("The report shipped with OmniRoute")
    page.get_by_role("button", name="Run a simulation now").click()

    expect(page.locator("#simulation-status")).to_contain_text("waiting for a worker")
    expect(page.get_by_role("button", name="Run a simulation now")).to_be_disabled()
    thread_worker.set()
    expect(page.locator("#report-origin")).to_contain_text(
        "The report of the simulation run from the dashboard by olga", timeout=20_000
    )
    run = SimulationRun.objects.get()
    expect(page.locator("#simulation-status")).to_contain_text(f"Simulation {run.pk} finished")
    expect(page.locator(".sim-lead")).to_contain_text("195 requests from")
    expect(page.get_by_role("button", name="Run a simulation now")).to_be_enabled()
    assert _serious_violations(page) == []
    assert [e for e in console_errors if "Content Security Policy" in e] == []
